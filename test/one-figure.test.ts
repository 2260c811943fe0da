import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { jobId } from '../src/core/job-ids.js';
import { analyzeRun, loadRunFacts } from '../src/reports/analysis.js';
import { exportRun } from '../src/reports/export.js';
import { buildLeaderboard, leaderboardColumns } from '../src/reports/leaderboard.js';
import { metricRows } from '../src/reports/render.js';
import { Store } from '../src/store/store.js';
import { suiteCsv } from '../src/suite/report.js';
import { getTask } from '../src/tasks/task.js';
import type { RunUsage } from '../src/transcripts/run-usage.js';
import { jobCard, toolRow } from '../src/view/run-page.js';
import { recordCheckVerdict } from './helpers/integrity.js';
import { startedJob, succeeded } from './helpers/jobs.js';
import { tempDir } from './helpers/sandbox.js';

const task = getTask('micro-gsm8k');

/** A run in a real store as the server writes it: a job of each kind given, with its log and events. */
function seedRun(store: Store, home: string, id: string, kinds: Array<'grading' | 'training'>) {
  const createdAt = Date.now() - 60_000;
  const dir = join(home, 'runs', id);
  mkdirSync(join(dir, 'logs'), { recursive: true });
  store.insertRun({
    id,
    task_id: task.id,
    label: 'seeded',
    budget: JSON.stringify({ wallSeconds: 600, computeSeconds: 600, submissions: 5, rolloutEpisodes: 100 }),
    dir,
    sandbox: 'bwrap',
    grader_version: task.graderVersion,
    owner: '0-0',
    created_at: createdAt,
  });
  recordCheckVerdict(store, id);
  let t = 0;
  const record = (kind: string, name: string, data: unknown) =>
    store.insertEvent({ run_id: id, at: createdAt + (t += 1000), t_rel_ms: t, kind, name, data: JSON.stringify(data) });
  return kinds.map((kind) => {
    const job = startedJob(store, {
      runId: id,
      logDir: join(dir, 'logs'),
      kind,
      command: `python3 ${kind}.py`,
      charged: kind === 'grading' ? 0 : 1,
      createdAt,
      log: 'step 1 loss 0.9\nstep 2 loss 0.7\n',
    });
    record('tool', 'run_training', { arguments: { command: job.command }, result: { job_id: jobId(job) }, duration_ms: 5 });
    record('job', 'started', { job_id: job.id, kind, command: job.command, charged: kind !== 'grading', log_path: job.log_path });
    succeeded(store, job.id, createdAt + t);
    record('job', 'finished', { job_id: job.id, kind, state: 'succeeded', exit_code: 0, charged: kind !== 'grading', cpu_s: 1, gpu_s: 0 });
    return store.getJob(job.id)!;
  });
}

describe('one job id and one dollar figure everywhere', () => {
  it("shows a job by the id the agent's tools give it in the view, the report, its timeline and the export", async () => {
    const home = tempDir('one-id');
    const store = new Store(join(home, 'store.sqlite'));
    // Another run's jobs first, and a grading job of its own: the store's id of the training job (4) is not its number in its run (1).
    seedRun(store, home, 'other', ['training', 'training']);
    const [grading, training] = seedRun(store, home, 'run', ['grading', 'training']);
    expect([training!.id, jobId(training!), jobId(grading!)]).toEqual([4, 'job-1', 'grading-3']);

    const card = (await jobCard(training!)).html;
    expect(card).toContain('>job-1 <code>');
    const out = join(home, 'export');
    exportRun(store, 'run', out);
    const report = readFileSync(join(out, 'report.html'), 'utf8');
    expect(report).toContain('<a href="logs/job-1.log">job-1</a>');
    expect(report).toContain('job-1 training started');
    expect(report).not.toMatch(/job-4\b/);
    expect(existsSync(join(out, 'logs', 'job-1.log')) && existsSync(join(out, 'logs', 'grading-3.log'))).toBe(true);
    // Every file names a job alike: `job_id` the store's id (jobs.json's `id`), `name` the id the agent and the report show.
    const jobs = JSON.parse(readFileSync(join(out, 'jobs.json'), 'utf8')) as Array<{ id: number; name: string }>;
    expect(jobs.map((job) => [job.id, job.name])).toEqual([
      [grading!.id, 'grading-3'],
      [training!.id, 'job-1'],
    ]);
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as { jobs: Array<{ job_id: number; name: string }> };
    expect(summary.jobs.map((job) => [job.job_id, job.name])).toContainEqual([training!.id, 'job-1']);
    expect((JSON.parse(readFileSync(join(out, 'run.json'), 'utf8')) as { format_version: number }).format_version).toBe(2);
    // The loss the view's card draws is the report's chart of the same log.
    expect(report).toContain('Training loss of job-1 by step');
    store.close();
  });

  it('folds long tool arguments in the view whole, and keeps short ones plain', () => {
    const long = { path: 'code/train.py', content: `${'x'.repeat(300)}THE-END` };
    const row = (args: unknown) =>
      toolRow({
        id: 1,
        run_id: 'r',
        at: Date.now(),
        t_rel_ms: 0,
        kind: 'tool',
        name: 'write_file',
        data: JSON.stringify({ arguments: args }),
      });
    expect(row(long)).toMatch(/<details><summary><code>.*…<\/code><\/summary><pre class="arguments">[^<]*THE-END/);
    expect(row({ path: 'a' })).not.toContain('<details>');
  });

  it('reads the same cost for the same run in the report, the leaderboard and the suite report', () => {
    // 0.00405: toFixed(4) alone gives 0.0040, scaling first 0.0041, as the report and the leaderboard once did.
    const cost = 0.00405;
    const usage: RunUsage = {
      agent: 'codex',
      model: 'm',
      transcript: null,
      turns: 1,
      tool_calls: 1,
      input_tokens: 10,
      cached_input_tokens: 0,
      output_tokens: 5,
      reasoning_tokens: 0,
      cost_usd: cost,
      cost_source: 'agent',
      price_table: null,
    };
    const home = tempDir('one-cost');
    const store = new Store(join(home, 'store.sqlite'));
    seedRun(store, home, 'run', ['training']);
    const reportCost = metricRows(analyzeRun(loadRunFacts(store, 'run')), usage).find(([name]) => name === 'agent cost')![1];
    store.close();
    const [row] = buildLeaderboard([
      {
        run_id: 'run',
        agent: 'codex',
        driver_model: 'm',
        task: task.id,
        final: 1,
        baseline: 0,
        improvement: 1,
        success: true,
        infrastructure_failure: null,
        integrity: 'clean',
        tokens: 10,
        cost_usd: cost,
      },
    ]);
    const boardCost = leaderboardColumns.find(([name]) => name === 'mean agent dollars')![1](row!);
    const suite = suiteCsv({
      suite: 's',
      policy: 'baseline',
      baselines: [{ task: task.id, baseline: 0 }],
      rows: [{ ...row!, cell: 'codex × m', best_score: 1, best_run: 'run', routes: { sft: 1, rl: 0, other: 0 }, interrupted: 0 }],
    });
    expect(reportCost).toBe("$0.0041, codex's own figure");
    expect(boardCost).toBe('0.0041');
    expect(suite.split('\n')[1]).toContain(',0.0041,');
  });
});
