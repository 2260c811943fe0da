import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliEntry, packageRoot } from '../src/util/paths.js';
import { Store } from '../src/store/store.js';
import { tempDir } from './helpers/sandbox.js';
import { processTree } from '../sandbox/process-tree.js';
import { hasWorkspaceImage, workspaceMounted } from '../sandbox/run-storage.js';
import { type InProcessRun, startInProcess } from './helpers/in-process.js';
import { call, rawServer, startServer, tweakScript, waitJob, waitScore } from './helpers/mcp.js';

const toolNames = [
  'read_instructions',
  'list_files',
  'read_file',
  'write_file',
  'exec',
  'run_training',
  'job_status',
  'job_logs',
  'cancel_job',
  'launch_rollouts',
  'submit_artifact',
  'get_score',
  'budget_status',
];

describe('MCP server, in process', () => {
  const home = tempDir('home');
  let served: InProcessRun;
  let client: Client;
  let runId: string;
  let workspace: string;

  beforeAll(async () => {
    served = await startInProcess({ home, budget: 'submissions=4' });
    client = served.client;
    // The baseline grading starts with the run: done before the tests, it cannot change what a refused call must leave as it was.
    await served.engine.gradeBaseline(served.run);
    runId = (await call(client, 'budget_status')).structured.run_id;
    workspace = join(home, 'runs', runId, 'workspace');
    mkdirSync(join(home, 'submissions'), { recursive: true });
  });

  afterAll(async () => {
    await served?.close();
  });

  /** What a bad call must leave as it was: files, stored snapshots, jobs, submissions, budget counters. */
  function observable(): string {
    const files: string[] = [];
    const walk = (dir: string, prefix: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        files.push(`${prefix}${entry.name}`);
        if (entry.isDirectory() && !['data', 'models', 'lib'].includes(entry.name)) walk(join(dir, entry.name), `${prefix}${entry.name}/`);
      }
    };
    walk(workspace, '');
    walk(join(home, 'submissions'), 'stored:');
    const store = new Store(join(home, 'store.sqlite'));
    try {
      const { submissions, rolloutEpisodes } = store.usage(runId);
      const jobs = store.listJobs(runId).map((job) => `${job.id}:${job.kind}:${job.state}`);
      return JSON.stringify({
        files: files.sort(),
        jobs,
        submissions: store.listSubmissions(runId),
        usage: { submissions, rolloutEpisodes },
      });
    } finally {
      store.close();
    }
  }

  it('offers every tool with a title, a description for a model, schemas and annotations', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(toolNames);
    for (const tool of tools) {
      expect(tool.title, tool.name).toBeTruthy();
      expect(tool.description!.length, tool.name).toBeGreaterThan(120);
      expect(tool.outputSchema?.type, tool.name).toBe('object');
      // No nullable unions (the MCP Inspector flags them as unportable): a field with no value is left out.
      expect(JSON.stringify(tool.outputSchema), tool.name).not.toMatch(/"null"/);
      expect(tool.inputSchema.additionalProperties, tool.name).toBe(false);
      expect(typeof tool.annotations?.readOnlyHint, tool.name).toBe('boolean');
      expect(tool.annotations?.openWorldHint, tool.name).toBe(false);
    }
    const readOnly = tools.filter((t) => t.annotations?.readOnlyHint).map((t) => t.name);
    expect(readOnly).toEqual(['read_instructions', 'list_files', 'read_file', 'job_status', 'job_logs', 'get_score', 'budget_status']);
  });

  it("gives the brief as a tool and as a resource, with this run's budget", async () => {
    const brief = await call(client, 'read_instructions');
    expect(brief.structured.task_id).toBe('micro-gsm8k');
    expect(brief.text).toContain('| submissions | 4 |');
    expect(brief.text).toContain('models/base/');
    const resources = await client.listResources();
    const resource = await client.readResource({ uri: resources.resources[0]!.uri });
    expect((resource.contents[0] as { text: string }).text).toBe(brief.text);
  });

  it('lists, writes and reads workspace files', async () => {
    const listing = await call(client, 'list_files', { depth: 3 });
    const paths = listing.structured.entries.map((e: { path: string }) => e.path);
    expect(paths).toEqual(
      expect.arrayContaining(['code', 'output', 'rollouts', 'data/train.jsonl', 'models/base/model.pt', 'lib/microlm', 'instructions.md']),
    );
    expect(paths.some((p: string) => p.startsWith('eval'))).toBe(false);
    const written = await call(client, 'write_file', { path: 'code/hello.py', content: 'print("hello from the sandbox")\n' });
    expect(written.structured).toEqual({ path: 'code/hello.py', bytes_written: 32, size: 32 });
    expect((await call(client, 'read_file', { path: '/workspace/code/hello.py' })).structured.content).toContain('hello from');
    const ran = await call(client, 'exec', { command: 'python3 code/hello.py' });
    expect(ran.structured).toMatchObject({ exit_code: 0, state: 'succeeded', timed_out: false });
    expect(ran.structured.output).toBe('hello from the sandbox\n');
  });

  it('reports exit codes and kills commands at their timeout', async () => {
    const failed = await call(client, 'exec', { command: 'echo oops >&2; exit 3' });
    expect(failed.structured).toMatchObject({ exit_code: 3, state: 'failed', output: 'oops\n' });
    const slow = await call(client, 'exec', { command: 'sleep 30', timeout_s: 1 });
    expect(slow.structured.state).toBe('timed_out');
    expect(slow.structured.timed_out).toBe(true);
    expect(slow.structured.duration_s).toBeLessThan(10);
  });

  it.each([
    [
      'write_file { path: ../escape.txt, content: x }',
      'write_file',
      { path: '../escape.txt', content: 'x' },
      /\[OUTSIDE_WORKSPACE\].*inside it/,
    ],
    [
      'write_file { path: /etc/passwd, content: x }',
      'write_file',
      { path: '/etc/passwd', content: 'x' },
      /\[OUTSIDE_WORKSPACE\].*relative to the workspace/,
    ],
    [
      'write_file { path: data/train.jsonl, content: x }',
      'write_file',
      { path: 'data/train.jsonl', content: 'x' },
      /\[READ_ONLY\].*code\//,
    ],
    [
      'write_file { path: models/base/model.pt, content: x }',
      'write_file',
      { path: 'models/base/model.pt', content: 'x' },
      /\[READ_ONLY\]/,
    ],
    ['write_file { path: models/mine.pt, content: x }', 'write_file', { path: 'models/mine.pt', content: 'x' }, /\[READ_ONLY\]/],
    [
      'write_file { path: lib/microlm/model.py, content: x }',
      'write_file',
      { path: 'lib/microlm/model.py', content: 'x' },
      /\[READ_ONLY\]/,
    ],
    [
      'write_file { path: code/big.txt, content: x.repeat(1024 * 1024 + 1) }',
      'write_file',
      { path: 'code/big.txt', content: 'x'.repeat(1024 * 1024 + 1) },
      /\[TOO_LARGE\].*Split it/,
    ],
    [
      'write_file { path: code/x.py }',
      'write_file',
      { path: 'code/x.py' },
      /^\[INVALID_INPUT\] Invalid arguments for write_file:.*content.*nothing was changed/s,
    ],
    [
      'write_file { path: code/x.py, content: x, mode: w }',
      'write_file',
      { path: 'code/x.py', content: 'x', mode: 'w' },
      /^\[INVALID_INPUT\] Invalid arguments for write_file:.*mode/s,
    ],
    ['read_file { path: code/missing.py }', 'read_file', { path: 'code/missing.py' }, /\[NOT_FOUND\].*list_files/],
    ['read_file { path: models/base/model.pt }', 'read_file', { path: 'models/base/model.pt' }, /\[INVALID_INPUT\].*binary.*exec/s],
    ['list_files { path: ../.. }', 'list_files', { path: '../..' }, /\[OUTSIDE_WORKSPACE\]/],
    ['job_status { job_id: job-99999 }', 'job_status', { job_id: 'job-99999' }, /\[NOT_FOUND\].*job-3/],
    ['job_logs { job_id: nonsense }', 'job_logs', { job_id: 'nonsense' }, /\[NOT_FOUND\]/],
    ['cancel_job { job_id: job-1;rm -rf / }', 'cancel_job', { job_id: 'job-1;rm -rf /' }, /\[NOT_FOUND\]/],
    ['exec { command:  }', 'exec', { command: '' }, /^\[INVALID_INPUT\] Invalid arguments for exec:/],
    [
      'exec { command: true, timeout_s: 600 }',
      'exec',
      { command: 'true', timeout_s: 600 },
      /^\[INVALID_INPUT\] Invalid arguments for exec:.*timeout_s/s,
    ],
    [
      'run_training { command: python3 code/train.py, gpus: 1 }',
      'run_training',
      { command: 'python3 code/train.py', gpus: 1 },
      /\[INVALID_INPUT\].*gpus: 0/,
    ],
    [
      'launch_rollouts { checkpoint: output, episodes: 8 }',
      'launch_rollouts',
      { checkpoint: 'output', episodes: 8 },
      /\[INVALID_INPUT\].*not a checkpoint folder/,
    ],
    [
      'launch_rollouts { episodes: 10, group_size: 4 }',
      'launch_rollouts',
      { episodes: 10, group_size: 4 },
      /\[INVALID_INPUT\].*multiple of group_size/,
    ],
    [
      'launch_rollouts { episodes: 4, threads: 3 }',
      'launch_rollouts',
      { episodes: 4, threads: 3 },
      /^\[INVALID_INPUT\] threads \(3\) is more than a job's 2 CPU\(s\); use 1 to 2\./,
    ],
    [
      'submit_artifact { path: models/base }',
      'submit_artifact',
      { path: 'models/base' },
      /\[INVALID_INPUT\].*base model unchanged.*Train it first/,
    ],
    ['submit_artifact { path: output }', 'submit_artifact', { path: 'output' }, /\[INVALID_INPUT\].*is empty/],
    ['submit_artifact { path: output/nothing-here }', 'submit_artifact', { path: 'output/nothing-here' }, /\[NOT_FOUND\].*output\/final/],
    ['submit_artifact { path: code/hello.py }', 'submit_artifact', { path: 'code/hello.py' }, /\[INVALID_INPUT\].*is a file/],
    ['submit_artifact { path: ../../.. }', 'submit_artifact', { path: '../../..' }, /\[OUTSIDE_WORKSPACE\]/],
    ['get_score { submission_id: sub-424242 }', 'get_score', { submission_id: 'sub-424242' }, /\[NOT_FOUND\]/],
    ['get_score { submission_id: best }', 'get_score', { submission_id: 'best' }, /\[INVALID_INPUT\].*sub-1/],
    // A name longer than the file system takes: whatever refuses it, the answer names the path as the agent sees it.
    ['write_file { path: code/a×300 }', 'write_file', { path: `code/${'a'.repeat(300)}`, content: 'x' }, /^\[[A-Z_]+\] /],
  ])('%s is refused with an actionable error, names no host path and changes nothing', async (_, tool, args, message) => {
    const before = observable();
    const result = await call(client, tool, args);
    expect(result.isError).toBe(true);
    expect(result.text).toMatch(message);
    expect(result.text).not.toContain(home);
    expect(result.text).not.toContain(packageRoot);
    expect(observable()).toEqual(before);
  });

  it('shows the agent nothing of the evaluation data, the grader, the store or the package, and no network', async () => {
    const probe = await call(client, 'exec', {
      command: [
        'find / -xdev \\( -name "public.jsonl" -o -name "private.jsonl" -o -name "grade.py" -o -name "store.sqlite*" \\) 2>/dev/null',
        `ls ${home} ${packageRoot} ${join(packageRoot, 'tasks')} 2>&1`,
        'env | grep -c A2RL',
        'python3 -c "import socket; socket.create_connection((\'registry.npmjs.org\', 443), 3)" 2>&1 | tail -1',
      ].join('; '),
    });
    const output = probe.structured.output as string;
    expect(output).not.toMatch(/public\.jsonl|private\.jsonl|grade\.py|store\.sqlite/);
    expect(output.match(/No such file or directory/g)?.length).toBe(3);
    expect(output).toMatch(/^0$/m);
    expect(output).toMatch(/gaierror|Network is unreachable/);
    const readOnly = await call(client, 'exec', { command: 'touch models/mine.pt lib/mine.py data/x 2>&1; ls models' });
    expect(readOnly.structured.output.match(/Read-only file system/g)?.length).toBe(3);
    expect(readOnly.structured.output).toMatch(/^base$/m);
  });

  it('refuses reading through a symlink the agent made to a host file', async () => {
    await call(client, 'exec', { command: 'ln -s /etc/hostname code/host-link && ln -s /etc code/etc-link' });
    for (const path of ['code/host-link', 'code/etc-link/hostname']) {
      const result = await call(client, 'read_file', { path });
      expect(result.isError, path).toBe(true);
      expect(result.text).toMatch(/OUTSIDE_WORKSPACE/);
    }
    const submit = await call(client, 'exec', {
      command:
        'mkdir -p output/linked && cp models/base/config.json output/linked/ && ln -s ../../models/base/model.pt output/linked/model.pt',
    });
    expect(submit.structured.exit_code).toBe(0);
    const result = await call(client, 'submit_artifact', { path: 'output/linked' });
    expect(result.text).toMatch(/symlink.*cp -L/s);
  });

  it('runs a training job, streams its progress, shows its logs and stops it on cancel', async () => {
    const started = await call(client, 'run_training', {
      command: 'for i in 1 2 3 4 5; do echo "step $i/5 loss 0.$i"; sleep 0.2; done; echo done; sleep 300',
    });
    expect(started.structured).toMatchObject({ kind: 'training', state: 'running' });
    const jobId = started.structured.job_id as string;
    const progress: string[] = [];
    const waited = await call(client, 'job_status', { job_id: jobId, wait_seconds: 3 }, (p) => progress.push(p.message ?? ''));
    expect(waited.structured.jobs[0].state).toBe('running');
    expect(progress.length).toBeGreaterThan(0);
    const logs = await call(client, 'job_logs', { job_id: jobId, grep: 'LOSS 0.2|loss 0.4' });
    expect(logs.structured.lines).toEqual(['step 2/5 loss 0.2', 'step 4/5 loss 0.4']);
    const tail = await call(client, 'job_logs', { job_id: jobId, tail: 2 });
    expect(tail.structured).toMatchObject({ first_line: 5, lines: ['step 5/5 loss 0.5', 'done'] });
    const window = await call(client, 'job_logs', { job_id: jobId, start_line: 5, tail: 2 });
    expect(window.structured).toMatchObject({ first_line: 5, lines: ['step 5/5 loss 0.5', 'done'], total_lines: 6 });
    const cancelled = await call(client, 'cancel_job', { job_id: jobId });
    expect(cancelled.structured.state).toBe('cancelled');
    expect(cancelled.structured.duration_s).toBeLessThan(15);
    const again = await call(client, 'cancel_job', { job_id: jobId });
    expect(again.text).toMatch(/had already ended/);
  });

  it('samples scored rollouts from a checkpoint into the workspace and charges the episodes', async () => {
    const launched = await call(client, 'launch_rollouts', {
      checkpoint: 'models/base',
      episodes: 16,
      group_size: 4,
      temperature: 1,
      seed: 3,
      threads: 1,
    });
    expect(launched.structured.out).toBe('rollouts/batch-001.jsonl');
    expect(launched.structured.command).toMatch(/ --threads 1 /);
    const job = await waitJob(client, launched.structured.job_id);
    expect(job.state).toBe('succeeded');
    // The job's BLAS and OpenMP pools have torch's one thread, not the job's two CPUs' worth of spinning ones.
    const logs = await call(client, 'job_logs', { job_id: launched.structured.job_id });
    expect(logs.structured.lines).toContain('rollouts: torch threads 1; OMP_NUM_THREADS 1, OPENBLAS_NUM_THREADS 1');
    expect(job.result).toMatchObject({ episodes: 16, out: 'rollouts/batch-001.jsonl' });
    // What the batch cost, to choose batch sizes and threads by.
    expect(job.result.episodes_per_second).toBeGreaterThan(0);
    expect(job.result.cpu_seconds_per_episode).toBeGreaterThan(0);
    const lines = readFileSync(join(workspace, 'rollouts', 'batch-001.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(16);
    for (const episode of lines) {
      expect(episode).toEqual(
        expect.objectContaining({ prompt: expect.stringMatching(/^Q: /), completion: expect.any(String), reward: expect.any(Number) }),
      );
      expect([0, 1]).toContain(episode.reward);
    }
    // Four prompts, four completions each.
    expect(new Set(lines.map((l) => l.prompt_index)).size).toBe(4);
    expect((await call(client, 'budget_status')).structured.rollout_episodes.used).toBe(16);
    // The server keeps its own copy of the episodes it read, linked from the batch event: the agent rewriting the file changes nothing.
    const { sha256, bytes } = job.result.trajectories;
    const copy = join(home, 'trajectories', `${sha256}.jsonl`);
    expect((await call(client, 'exec', { command: 'echo "{}" > rollouts/batch-001.jsonl' })).structured.exit_code).toBe(0);
    const kept = readFileSync(copy, 'utf8');
    expect(Buffer.byteLength(kept)).toBe(bytes);
    expect(createHash('sha256').update(kept).digest('hex')).toBe(sha256);
    expect(
      kept
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l)),
    ).toEqual(lines);
    const store = new Store(join(home, 'store.sqlite'));
    try {
      const batch = store.listEvents(runId, 'rollouts').find((e) => e.name === 'batch')!;
      expect(JSON.parse(batch.data)).toMatchObject({
        job_id: expect.any(Number),
        out: 'rollouts/batch-001.jsonl',
        trajectories: { sha256, bytes },
      });
    } finally {
      store.close();
    }
  });

  it('grades a submission once, returns it again for identical content, and reports the baseline', async () => {
    expect((await call(client, 'exec', { command: tweakScript('output/tweak', 1.01) })).structured.exit_code).toBe(0);
    const first = await call(client, 'submit_artifact', { path: 'output/tweak', note: 'scaled weights' });
    expect(first.structured).toMatchObject({ submission_id: expect.stringMatching(/^sub-\d+$/), duplicate: false, submissions_left: 3 });
    const scored = await waitScore(client, first.structured.submission_id);
    expect(scored.submissions[0].state).toBe('graded');
    expect(scored.submissions[0].score).toBeGreaterThanOrEqual(0);
    expect(scored.submissions[0].score).toBeLessThanOrEqual(100);
    // A copy elsewhere is the same content: the earlier submission, nothing charged.
    await call(client, 'exec', { command: 'cp -r output/tweak output/tweak-copy' });
    const again = await call(client, 'submit_artifact', { path: 'output/tweak-copy' });
    expect(again.structured).toMatchObject({
      submission_id: first.structured.submission_id,
      duplicate: true,
      state: 'graded',
      submissions_left: 3,
    });
    const all = await call(client, 'get_score');
    expect(all.structured.submissions).toHaveLength(1);
    expect(all.structured.baseline.state).toBe('graded');
    expect(all.structured.baseline.score).toBeGreaterThanOrEqual(2);
    expect(all.structured.baseline.score).toBeLessThanOrEqual(30);
    expect(all.structured.best.submission_id).toBe(first.structured.submission_id);
  });

  it('marks a checkpoint the grader cannot load as failed with the reason, never as a score', async () => {
    const made = await call(client, 'exec', {
      command: `mkdir -p output/evil && cp models/base/config.json output/evil/ && python3 -c "
import os, pickle
class Payload:
    def __reduce__(self):
        return (os.system, ('echo pwned > /opt/a2rl/out/result.json',))
pickle.dump({'x': Payload()}, open('output/evil/model.pt', 'wb'))
"`,
    });
    expect(made.structured.exit_code).toBe(0);
    const submitted = await call(client, 'submit_artifact', { path: 'output/evil' });
    const scored = await waitScore(client, submitted.structured.submission_id);
    expect(scored.submissions[0].state).toBe('failed');
    expect(scored.submissions[0]).not.toHaveProperty('score');
    expect(scored.submissions[0].error).toMatch(/could not score|model\.pt/);
  });

  it('records every tool call, the refused and the malformed ones too', async () => {
    await call(client, 'write_file', { path: '../recorded-escape', content: 'x' });
    await call(client, 'exec', { command: 'true', timeout_s: 'soon' });
    const store = new Store(join(home, 'store.sqlite'));
    try {
      const events = store.listEvents(runId, 'tool').map((e) => ({ name: e.name, data: JSON.parse(e.data) }));
      const escape = events.find((e) => e.data.arguments?.path === '../recorded-escape');
      expect(escape?.data.error).toMatch(/OUTSIDE_WORKSPACE/);
      const malformed = events.find((e) => e.name === 'exec' && e.data.arguments?.timeout_s === 'soon');
      expect(malformed?.data.error).toMatch(/^\[INVALID_INPUT\] Invalid arguments for exec:.*timeout_s/s);
      expect(events.every((e) => typeof e.data.duration_ms === 'number')).toBe(true);
      expect(new Set(events.map((e) => e.name))).toEqual(new Set(toolNames));
      expect(store.listEvents(runId, 'session')[0]?.data).toContain('a2rl-test');
    } finally {
      store.close();
    }
  });
});

describe('budget enforcement', () => {
  const home = tempDir('home');

  it('caps submissions and keeps nothing of a refused one', async () => {
    const { client, close } = await startInProcess({ home, budget: 'submissions=1' });
    try {
      for (const scale of [1.01, 1.02])
        expect((await call(client, 'exec', { command: tweakScript(`output/s${scale}`, scale) })).structured.exit_code).toBe(0);
      expect((await call(client, 'submit_artifact', { path: 'output/s1.01' })).isError).toBe(false);
      const stored = readdirSync(join(home, 'submissions'));
      const refused = await call(client, 'submit_artifact', { path: 'output/s1.02' });
      expect(refused.text).toMatch(/\[BUDGET_EXHAUSTED\] All 1 submissions/);
      expect(readdirSync(join(home, 'submissions'))).toEqual(stored);
      expect((await call(client, 'budget_status')).structured.submissions).toMatchObject({ used: 1, left: 0 });
    } finally {
      await close();
    }
  });

  it('stops jobs when compute runs out and refuses new ones', async () => {
    const { client, close } = await startInProcess({ home, budget: 'compute=6s' });
    try {
      const started = await call(client, 'run_training', { command: 'python3 -c "while True: pass"' });
      const job = await waitJob(client, started.structured.job_id, 120);
      expect(job.state).toBe('budget_stopped');
      expect(job.cpu_s).toBeGreaterThanOrEqual(6);
      const budget = await call(client, 'budget_status');
      expect(budget.structured.exhausted).toContain('compute_seconds');
      for (const [tool, args] of [
        ['run_training', { command: 'true' }],
        ['exec', { command: 'true' }],
        ['launch_rollouts', { episodes: 1 }],
      ] as const) {
        const refused = await call(client, tool, args);
        expect(refused.isError, tool).toBe(true);
        expect(refused.text).toMatch(/\[BUDGET_EXHAUSTED\].*compute budget is spent.*submit_artifact/);
      }
    } finally {
      await close();
    }
  });

  it('ends the run when the wall clock runs out', async () => {
    const { client, run, close } = await startInProcess({ home, budget: 'wall=4s' });
    try {
      const started = await call(client, 'run_training', { command: 'sleep 300' });
      const job = await waitJob(client, started.structured.job_id, 60);
      expect(job.state).toBe('budget_stopped');
      const budget = await call(client, 'budget_status');
      expect(budget.structured).toMatchObject({ run_state: 'ended', end_reason: 'wall-clock budget exhausted' });
      const refused = await call(client, 'exec', { command: 'true' });
      expect(refused.text).toMatch(/\[RUN_ENDED\]/);
      const listing = await call(client, 'list_files', {});
      expect(listing.isError).toBe(false);
      // Its files are final: a write is refused, before and after its image goes.
      const late = await call(client, 'write_file', { path: 'code/late.txt', content: 'x' });
      expect(late.text).toMatch(/^\[RUN_ENDED\].*nothing more is written to it/);
      if (hasWorkspaceImage(run.dir)) {
        // Unmounted once its contamination check is done: reads are refused, not answered from the empty mount point.
        for (const deadline = Date.now() + 120_000; workspaceMounted(run.dir); await new Promise((resolve) => setTimeout(resolve, 100))) {
          if (Date.now() > deadline) throw new Error("the ended run's image was not unmounted within 120 s");
        }
        const read = await call(client, 'read_file', { path: 'instructions.md' });
        expect(read.text).toMatch(/^\[RUN_ENDED\].*its files are no longer served/);
        expect((await call(client, 'list_files', {})).text).toMatch(/^\[RUN_ENDED\]/);
      }
      expect(existsSync(join(run.dir, 'workspace', 'code', 'late.txt'))).toBe(false);
    } finally {
      await close();
    }
  });
});

describe('stdio transport', () => {
  it('writes nothing but JSON-RPC to stdout', async () => {
    const server = rawServer(tempDir('home'));
    await server.initialize();
    const response = await server.request('tools/call', { name: 'exec', arguments: { command: 'echo to-stdout; echo to-stderr >&2' } });
    expect(response.result.structuredContent.output).toBe('to-stdout\nto-stderr\n');
    server.child.stdin.end();
    expect(await server.exited).toBe(0);
    const { stdout, stderr } = server.output();
    const lines = stdout.trim().split('\n');
    expect(lines.map((line) => JSON.parse(line).jsonrpc)).toEqual(lines.map(() => '2.0'));
    expect(stderr).toMatch(/"msg":"run ready"/);
  });

  it('leaves no sandbox process behind when the server is killed; the next start ends its run, marks its jobs lost and finishes its grading', async () => {
    const home = tempDir('home');
    const server = rawServer(home);
    await server.initialize();
    const tool = async (name: string, args: object) =>
      (await server.request('tools/call', { name, arguments: args })).result.structuredContent;
    expect((await tool('exec', { command: tweakScript('output/tweak', 1.01) })).exit_code).toBe(0);
    const started = await tool('run_training', { command: 'sleep 300 & sleep 300' });
    const submitted = await tool('submit_artifact', { path: 'output/tweak' });
    // The numbers the agent knows them by, in its run.
    const jobSeq = Number(started.job_id.replace('job-', ''));
    const submissionSeq = Number(submitted.submission_id.replace('sub-', ''));
    await new Promise((resolve) => setTimeout(resolve, 300));
    const sandboxProcesses = processTree(server.child.pid!).slice(1);
    expect(sandboxProcesses.length).toBeGreaterThanOrEqual(3);
    server.child.kill('SIGKILL');
    await server.exited;
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const alive = sandboxProcesses.filter((pid) => existsSync(`/proc/${pid}`) && !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8')));
    expect(alive).toEqual([]);
    const runId = readdirSync(join(home, 'runs'))[0]!;
    const store = new Store(join(home, 'store.sqlite'));
    const submissionState = () => store.getSubmissionBySeq(runId, submissionSeq)?.state;
    try {
      expect(submissionState()).not.toBe('graded');
      const client = await startServer({ home });
      try {
        expect(store.getRun(runId)).toMatchObject({ state: 'ended', end_reason: 'the server stopped before the run ended' });
        expect(store.getJobBySeq(runId, jobSeq)).toMatchObject({ state: 'lost' });
        for (let i = 0; i < 120 && submissionState() !== 'graded'; i++) await new Promise((resolve) => setTimeout(resolve, 500));
        expect(submissionState()).toBe('graded');
      } finally {
        await client.close();
      }
      expect(store.listEvents(runId, 'tool').map((e) => e.name)).toEqual(['exec', 'run_training', 'submit_artifact']);
    } finally {
      store.close();
    }
  });

  it('refuses an unknown task, a bad budget or an incomplete judge at the command line', async () => {
    const runCli = (args: string[]) =>
      new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, [cliEntry, ...args], {
          env: { ...process.env, A2RL_HOME: tempDir('home') },
        });
        let stderr = '';
        child.stderr.on('data', (chunk) => (stderr += chunk));
        child.once('exit', (code) => resolve({ code, stderr }));
      });
    const unknown = await runCli(['serve', '--task', 'gsm9k']);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/Unknown task "gsm9k". Available tasks: .*micro-gsm8k/);
    const budget = await runCli(['serve', '--task', 'micro-gsm8k', '--budget', 'wall=ten']);
    expect(budget.code).not.toBe(0);
    expect(budget.stderr).toMatch(/Cannot read budget item "wall=ten"/);
    const judge = await runCli(['serve', '--task', 'micro-gsm8k', '--judge', 'llm']);
    expect(judge.code).not.toBe(0);
    expect(judge.stderr).toMatch(/--judge llm needs --judge-url .* and --judge-model/);
    // The level-3 tasks' training data holds games, no demonstrations: they have only a reward-only oracle.
    const route = await runCli(['demo', '--task', 'micro-alfworld', '--route', 'sft']);
    expect(route.code).not.toBe(0);
    expect(route.stderr).toMatch(/micro-alfworld has no sft oracle; it has: reward-only\. Pick one of those with --route/);
  });
});
