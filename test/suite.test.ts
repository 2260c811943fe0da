import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cellRuns, interruptedReason, planCells, runStanding } from '../src/suite/plan.js';
import { loadSuite } from '../src/suite/schema.js';
import { summarizeRun } from '../src/reports/summary.js';
import { Store } from '../src/store/store.js';
import { runUsage, totalTokens } from '../src/transcripts/run-usage.js';
import { cliEntry, packageRoot } from '../src/util/paths.js';
import { tweakScript } from './helpers/mcp.js';
import { modelApiEnv, type ModelRequest, type ModelStep, startModelApi } from './helpers/model-apis.js';
import { tempDir } from './helpers/sandbox.js';

/**
 * `a2rl suite`: the suite file's checks, and a whole suite (two replays and Claude Code against a scripted model API,
 * × two micro tasks × two repeats) killed with SIGKILL halfway, run again to the end, and reported; the CSV's figures
 * are the runs' records in the store.
 */

function writeSuite(dir: string, text: string): string {
  const file = join(dir, 'suite.yaml');
  writeFileSync(file, text);
  return file;
}

describe('suite files', () => {
  const dir = tempDir('suite-files');
  const errorOf = (text: string) => {
    try {
      loadSuite(writeSuite(dir, text));
    } catch (error) {
      return (error as Error).message;
    }
    throw new Error('the suite was accepted');
  };

  it('the example in suites/ parses into its cells', () => {
    const suite = loadSuite(join(packageRoot, 'suites', 'paper-matrix.example.yaml'));
    const cells = planCells(suite);
    expect(cells).toHaveLength(4 * 3);
    expect(cells.map((cell) => cell.label)).toContain('suite:paper-matrix/claude-code/claude-sonnet-4-5');
    expect(cells.find((cell) => cell.task.id === 'humaneval')!.limits.wallSeconds).toBe(6 * 3600);
    expect(cells.find((cell) => cell.task.id === 'gsm8k')!.limits.wallSeconds).toBe(8 * 3600);
    expect(suite.backend).toMatchObject({ sandbox: 'slurm', parallel: 24, transport: 'http' });
  });

  it('names the field and what to write instead, for each mistake at once', () => {
    const message = errorOf(`
name: bad
tasks: [micro-gsm8k]
agents:
  - agent: claude-code
    replay: x.jsonl
  - agent: codex
    models: [{name: gpt, env: ["OPENAI_API_KEY=sk-live"]}]
backend: {sandbox: slurm}
`);
    expect(message).toContain('agents[0]: give exactly one of agent:');
    expect(message).toContain('agents[1].models[0].env[0]: --agent-env takes a variable name');
    expect(message).toContain('backend.parallel: a cluster');
    expect(message).not.toContain('sk-live=');
    expect(errorOf('name: bad\ntasks: [micro-nope]\nagents: [{agent: codex}]\n')).toMatch(/tasks\[0\]: Unknown task "micro-nope"/);
    expect(errorOf('name: bad\ntasks: [micro-gsm8k]\nagents: [{replay: {micro-gsm8k: none.jsonl}}]\n')).toContain(
      'agents[0].replay: no file at',
    );
    expect(errorOf('name: bad\ntasks: [micro-gsm8k]\nagents: [{agent: codex}, {agent: codex}]\n')).toContain('two agents are named codex');
    expect(errorOf('name: bad\ntasks: [micro-gsm8k]\nagents: [{agent: codex}]\nrepeat: 2\n')).toMatch(/Unrecognized key.*repeat/);
    expect(errorOf('name: [\n')).toContain('is not YAML or JSON');
    expect(errorOf('name: bad\ntasks: [micro-gsm8k]\nagents: [{agent: codex, models: [{name: a, args: [-c, model=b]}]}]\n')).toContain(
      'agents[0].models[0].args: model=b names the model, which the runs would not record; list it under models:',
    );
  });

  it("resolves a command agent's leading ./ or ../ path from the suite file's folder, as it does replay: and bind:", () => {
    const suite = loadSuite(
      writeSuite(
        dir,
        "name: paths\ntasks: [micro-gsm8k]\nagents:\n  - {id: here, command: './agent.sh --fast', bind: [.]}\n  - {id: up, command: ../tools/agent}\n  - {id: path, command: python3 -m agent}\n",
      ),
    );
    expect(suite.agents.map((agent) => agent.command)).toEqual([
      `'${join(dir, 'agent.sh')}' --fast`,
      `'${join(dir, '..', 'tools', 'agent')}'`,
      'python3 -m agent',
    ]);
    expect(suite.agents[0]!.bind).toEqual([dir]);
  });
});

/** A training job that makes a submittable model: the base model's weights scaled (a job, not exec: no 30 s limit on a loaded host). */
const tweak = (scale: number) => ({ tool: 'run_training', arguments: { command: tweakScript('output/tweaked', scale) } });
const finished = ['succeeded', 'failed', 'cancelled', 'timed_out', 'oom_killed', 'budget_stopped', 'lost'];

/**
 * Claude Code's next step, from its own conversation so far: one model API serves every run at once. Train, wait for
 * the job, submit, end.
 */
function claudeStep(request: ModelRequest): ModelStep {
  // The conversation only (the tools' schemas name submission_id too). Claude Code passes a tool's structured result
  // on, JSON-escaped in the history; its text is matched too.
  const text = JSON.stringify(request.body.messages ?? []);
  if (/submission_id\\*"\s*:|Submitted output\/tweaked as|has the same content as/.test(text))
    return { text: 'Done: submitted output/tweaked.' };
  const job = [...text.matchAll(/job_id\\*"\s*:\s*\\*"(job-\d+)|Started (job-\d+)/g)].map((match) => match[1] ?? match[2]).at(-1);
  if (!job) return { call: [tweak(1.02)] };
  const states = finished.join('|');
  if (new RegExp(`state\\\\*"\\s*:\\s*\\\\*"(${states})\\b|${job} \\[training\\] (${states})\\b`).test(text)) {
    return { call: [{ tool: 'submit_artifact', arguments: { path: 'output/tweaked' } }] };
  }
  return { call: [{ tool: 'job_status', arguments: { job_id: job, wait_seconds: 45 } }] };
}

interface Invocation {
  code: number | null;
  signal: string | null;
  stderr: string;
  stdout: string;
}

describe('a2rl suite run and report', { timeout: 1_200_000 }, () => {
  const home = tempDir('suite');
  const dir = tempDir('suite-file');
  let api: Awaited<ReturnType<typeof startModelApi>>;
  let file = '';

  beforeAll(async () => {
    api = await startModelApi(Array.from({ length: 1000 }, () => claudeStep));
    writeFileSync(
      join(dir, 'tweak.jsonl'),
      [
        { ...tweak(1.01), save: 'train' },
        {
          tool: 'job_status',
          arguments: { job_id: '${train.job_id}', wait_seconds: 45 },
          until: { field: 'jobs.0.state', in: finished },
          timeout_s: 170,
          expect: { field: 'jobs.0.state', equals: 'succeeded' },
        },
        { tool: 'submit_artifact', arguments: { path: 'output/tweaked' } },
      ]
        .map((step) => JSON.stringify(step))
        .join('\n'),
    );
    writeFileSync(join(dir, 'reader.jsonl'), `${JSON.stringify({ tool: 'read_instructions' })}\n`);
    file = writeSuite(
      dir,
      `name: ci
repeats: 2
budget: wall=3m,submissions=2
tasks: [micro-gsm8k, micro-alfworld]
agents:
  - id: tweaker
    replay: tweak.jsonl
  - id: reader
    replay: reader.jsonl
  - agent: claude-code
    models:
      - name: scripted-model
        env: [ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY]
backend:
  parallel: 2
  grace_seconds: 5
`,
    );
  });
  afterAll(async () => api?.close());

  /** `a2rl suite …` in a process of its own; `until` kills it (SIGKILL) at the first stderr line it accepts. */
  const suite = (args: string[], until?: (line: string) => boolean) =>
    new Promise<Invocation>((resolve) => {
      const child = spawn(process.execPath, [cliEntry, '--home', home, '--init', 'suite', ...args], {
        env: { ...process.env, ...modelApiEnv(api.url) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk));
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk;
        if (until && stderr.split('\n').some(until)) child.kill('SIGKILL');
      });
      child.once('close', (code, signal) => resolve({ code, signal, stderr, stdout }));
    });

  const withStore = <T>(use: (store: Store) => T): T => {
    const store = new Store(join(home, 'store.sqlite'));
    try {
      return use(store);
    } finally {
      store.close();
    }
  };

  it('is killed halfway, goes on where it stopped, and its CSV is the runs of the store', async () => {
    const planned = await suite(['run', file, '--dry-run']);
    expect(planned.code, planned.stderr).toBe(0);
    expect(planned.stdout).toContain('to run: 12 runs; at most 36m of agent wall clock');

    const killed = await suite(['run', file, '--progress-seconds', '1'], (line) => /: ([4-9]|1\d)\/12 runs done/.test(line));
    expect(killed.signal, killed.stderr).toBe('SIGKILL');
    const cells = planCells(loadSuite(file));
    const doneAtKill = withStore(
      (store) => [...cellRuns(store, cells).values()].flat().filter((run) => runStanding(store, run) === 'done').length,
    );
    expect(doneAtKill).toBeGreaterThanOrEqual(4);
    expect(doneAtKill).toBeLessThan(12);

    const resumed = await suite(['run', file, '--progress-seconds', '1']);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stderr).toContain('ci: 12/12 runs done, 0 running, 0 failed, 0 queued; done');
    const runs = withStore((store) => {
      const byCell = cellRuns(store, cells);
      for (const [cell, cellRunsOf] of byCell) {
        // Every cell has exactly its repeats done; whatever the kill cut short is marked, never counted.
        const standings = cellRunsOf.map((run) => runStanding(store, run));
        expect(
          standings.filter((standing) => standing === 'done'),
          cell.id,
        ).toHaveLength(2);
        expect(
          standings.filter((standing) => standing === 'unsettled'),
          cell.id,
        ).toEqual([]);
        for (const run of cellRunsOf.filter((r) => runStanding(store, r) === 'interrupted')) {
          expect(run.infrastructure_failure).toBe(interruptedReason);
          expect(run.state).toBe('ended');
        }
      }
      return [...byCell].map(([cell, list]) => ({ cell, runs: list.filter((run) => runStanding(store, run) === 'done') }));
    });
    // The resumed invocation made only what was missing.
    expect(resumed.stderr).toContain(`${doneAtKill}/12 runs done`);
    const again = await suite(['run', file, '--dry-run']);
    expect(again.stdout).toContain('to run: 0 runs');

    const out = tempDir('suite-report');
    const report = await suite(['report', file, '--out', out]);
    expect(report.code, report.stderr).toBe(0);
    expect(report.stdout).toContain('## micro-gsm8k (baseline');
    for (const name of ['suite.md', 'suite.tex', 'suite.html']) expect(readFileSync(join(out, name), 'utf8').length).toBeGreaterThan(500);
    expect(readFileSync(join(out, 'suite.tex'), 'utf8')).toContain('\\begin{tabular}');
    expect(readFileSync(join(out, 'suite.html'), 'utf8')).toContain('new uPlot(');

    const [header, ...lines] = readFileSync(join(out, 'suite.csv'), 'utf8').trim().split('\n');
    const columns = header!.split(',');
    const rows = lines.map((line) => Object.fromEntries(line.split(',').map((value, index) => [columns[index]!, value])));
    expect(rows).toHaveLength(runs.length);
    withStore((store) => {
      for (const { cell, runs: done } of runs) {
        const row = rows.find((r) => r['task'] === cell.task.id && r['agent × model'] === cell.id)!;
        const summaries = done.map((run) => summarizeRun(store, run.id));
        const finals = summaries.map((summary) => summary.best?.private ?? summary.baseline!.private);
        const baseline = summaries[0]!.baseline!.private;
        const mean = finals.reduce((a, b) => a + b, 0) / finals.length;
        expect(row, cell.id).toMatchObject({
          runs: '2',
          'mean final score': mean.toFixed(2),
          'best run score': Math.max(...finals).toFixed(2),
          baseline: baseline.toFixed(2),
          'Δ over baseline': `${mean - baseline >= 0 ? '+' : ''}${(mean - baseline).toFixed(2)}`,
          // Runs whose infrastructure failed (on a loaded host a request may time out) were retried, and are counted apart.
          'infrastructure failures': String(
            cellRuns(store, [cell])
              .get(cell)!
              .filter((run) => runStanding(store, run) === 'failed').length,
          ),
          interrupted: String(
            cellRuns(store, [cell])
              .get(cell)!
              .filter((run) => runStanding(store, run) === 'interrupted').length,
          ),
        });
        expect(done.map((run) => run.id)).toContain(row['best run']);
        if (cell.agentId === 'claude-code') {
          const tokens = done.map((run) => totalTokens(runUsage(store, run.id)) as number);
          expect(row['tokens per run']).toBe(String(Math.round(tokens.reduce((a, b) => a + b, 0) / tokens.length)));
        } else expect(row['tokens per run']).toBe('');
        // The reader submits nothing: its runs score the baseline.
        if (cell.agentId === 'reader') expect(row['mean final score']).toBe(baseline.toFixed(2));
      }
    });
  });
});
