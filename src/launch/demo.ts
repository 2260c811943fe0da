import cliProgress from 'cli-progress';
import { createWriteStream, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { connectStdio } from './client.js';
import { playReplay, loadReplay, type ReplayStep } from './replay.js';
import { summarizeRun, type RunSummary } from '../reports/summary.js';
import { Store } from '../store/store.js';
import { getTask, type MicroTask, type OracleRoute } from '../tasks/task.js';
import { A2rlError } from '../util/errors.js';

export interface DemoOptions {
  task: string;
  /** Which of the task's oracles (default: its main one, the first). */
  route?: OracleRoute;
  home: string;
  budget?: string;
  label?: string;
}

/** The task's oracle of a route, or its main one; a route it has no oracle for is refused, naming the ones it has. */
export function oracleOf(task: MicroTask, route?: OracleRoute): MicroTask['oracleReplays'][number] {
  const oracle = route === undefined ? task.oracleReplays[0] : task.oracleReplays.find((o) => o.route === route);
  if (!oracle) {
    throw new A2rlError(
      'INVALID_INPUT',
      `${task.id} has no ${route} oracle; it has: ${task.oracleReplays.map((o) => o.route).join(', ')}. Pick one of those with --route, or leave --route out.`,
    );
  }
  return oracle;
}

/**
 * One full benchmark run of a task's oracle through the real MCP server over stdio,
 * with live progress, then the run's result from the store.
 */
export async function runDemo(options: DemoOptions): Promise<RunSummary> {
  const task = getTask(options.task);
  const oracle = oracleOf(task, options.route);
  const replay = loadReplay(oracle.replay);
  mkdirSync(options.home, { recursive: true });
  const serverLog = join(options.home, 'demo-server.log');
  const { client, stderr } = await connectStdio({
    task: task.id,
    budget: options.budget,
    label: options.label ?? `oracle (${oracle.route})`,
    home: options.home,
    stderr: 'pipe',
    clientName: 'a2rl-demo',
  });
  stderr?.pipe(createWriteStream(serverLog, { flags: 'a' }));
  process.stderr.write(`a2rl demo: the ${task.id} ${oracle.route} oracle through the MCP server over stdio (server log: ${serverLog})\n`);

  const bar = new cliProgress.SingleBar(
    {
      format: '  {bar} {value}/{total} {detail}',
      hideCursor: true,
      clearOnComplete: true,
      noTTYOutput: true,
      notTTYSchedule: 10_000,
      stream: process.stderr,
    },
    cliProgress.Presets.shades_classic,
  );
  let barActive: ReplayStep | undefined;
  const stopBar = () => {
    if (barActive) bar.stop();
    barActive = undefined;
  };
  let runId: string | undefined;
  try {
    await playReplay(client, replay, {
      onStep: (step, index, total) => {
        stopBar();
        process.stderr.write(`[${index + 1}/${total}] ${step.tool}${step.comment ? `: ${step.comment}` : ''}\n`);
      },
      onProgress: (step, progress) => {
        // Training scripts print "step N/M": that becomes a bar; other progress stays quiet.
        const steps = /step (\d+)\/(\d+)/.exec(progress.message ?? '');
        if (!steps) return;
        const detail = (progress.message ?? '').replace(/^job-\d+ running after \d+s: /, '').slice(0, 60);
        if (barActive !== step) {
          stopBar();
          bar.start(Number(steps[2]), 0, { detail });
          barActive = step;
        }
        bar.setTotal(Number(steps[2]));
        bar.update(Number(steps[1]), { detail });
      },
      onResult: (outcome) => {
        stopBar();
        if (typeof outcome.structured?.run_id === 'string') runId = outcome.structured.run_id;
        const firstLine = outcome.text.split('\n').find((line) => line.trim()) ?? '';
        process.stderr.write(`      ${outcome.isError ? 'error: ' : ''}${firstLine.slice(0, 110)}\n`);
      },
    });
  } finally {
    stopBar();
    await client.close();
  }
  if (!runId) throw new Error('the oracle replay never called budget_status, so its run is unknown');
  const store = new Store(join(options.home, 'store.sqlite'));
  try {
    return summarizeRun(store, runId);
  } finally {
    store.close();
  }
}
