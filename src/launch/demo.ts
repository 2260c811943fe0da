import cliProgress from 'cli-progress';
import { createWriteStream, mkdirSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { connectStdio } from './client.js';
import { playReplay, loadReplay, ReplayFailure, type ReplayStep } from './replay.js';
import { summarizeRun, type RunSummary } from '../reports/summary.js';
import { Store } from '../store/store.js';
import { getTask, type MicroTask, type OracleRoute } from '../tasks/task.js';
import { A2rlError } from '../util/errors.js';
import { type Progress, startProgress } from '../util/progress.js';

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

/** One task's demo: its run's summary (none when the run never started), and why the oracle failed, in one line. */
export interface DemoResult {
  task: string;
  summary?: RunSummary;
  failure?: string;
}

/** The machine's load average over time, sampled while the demo runs: what a job stopped by its budget competed with. */
class LoadSamples {
  private readonly samples: Array<{ at: number; load: number }> = [];
  private readonly timer = setInterval(() => this.take(), 5000).unref();
  constructor() {
    this.take();
  }
  private take(): void {
    this.samples.push({ at: Date.now(), load: loadavg()[0]! });
  }
  /** The mean 1-minute load average between two times (the nearest sample when none lies between). */
  between(from: number, to: number): number {
    const within = this.samples.filter((s) => s.at >= from && s.at <= to);
    const chosen = within.length > 0 ? within : [this.samples.reduce((a, b) => (Math.abs(b.at - to) < Math.abs(a.at - to) ? b : a))];
    return chosen.reduce((sum, s) => sum + s.load, 0) / chosen.length;
  }
  stop(): void {
    clearInterval(this.timer);
  }
}

/**
 * Why a run's oracle failed, in one line. A job its budget stopped is the common cause on a loaded machine (issue 47):
 * the line gives its wall time and CPU-seconds, and, where the job got under half the CPU it was given, the machine's
 * load while it ran, so that a slow machine is not mistaken for a broken oracle.
 */
export function failureLine(store: Store, runId: string | undefined, failure: string, load?: LoadSamples): string {
  const stopped = runId ? store.listJobs(runId).filter((job) => job.state === 'budget_stopped') : [];
  const job = stopped.at(-1);
  if (!job) return failure;
  const wall = ((job.ended_at ?? Date.now()) - job.created_at) / 1000;
  const cpus = (JSON.parse(job.resources) as { cpus?: number }).cpus ?? 1;
  const share = wall > 0 ? job.cpu_s / (wall * cpus) : 1;
  const starved =
    share < 0.5 && load
      ? `; it got ${Math.round(share * 100)}% of its ${cpus} CPU(s): the machine's load averaged ${load.between(job.created_at, job.ended_at ?? Date.now()).toFixed(1)} on ${availableParallelism()} cores meanwhile`
      : '';
  return (
    `job-${job.seq ?? job.id} (${job.kind}) was stopped by the budget (${job.reason ?? 'budget spent'}) after ` +
    `${Math.round(wall)} s wall, ${Math.round(job.cpu_s)} CPU-s${starved}, so ${failure.split(':')[0]} failed: ` +
    'run it on a less loaded machine, or give more with --budget'
  );
}

/**
 * One full benchmark run of a task's oracle through the real MCP server over stdio,
 * with live progress, then the run's result from the store. A replay that fails is the result's `failure`, not a throw.
 */
export async function runDemo(options: DemoOptions): Promise<DemoResult> {
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
  const load = new LoadSamples();
  // A step that waits long without step-by-step progress (grading, a run's start) still shows it is alive.
  let waiting: Progress | undefined;
  let runId: string | undefined;
  let failure: string | undefined;
  try {
    await playReplay(client, replay, {
      onStep: (step, index, total) => {
        stopBar();
        waiting?.stop();
        process.stderr.write(`[${index + 1}/${total}] ${step.tool}${step.comment ? `: ${step.comment}` : ''}\n`);
        waiting = startProgress(step.tool, undefined);
      },
      onProgress: (step, progress) => {
        // Training scripts print "step N/M": that becomes a bar; other progress stays quiet.
        const steps = /step (\d+)\/(\d+)/.exec(progress.message ?? '');
        if (!steps) return;
        waiting?.stop();
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
        waiting?.stop();
        if (typeof outcome.structured?.run_id === 'string') runId = outcome.structured.run_id;
        const firstLine = outcome.text.split('\n').find((line) => line.trim()) ?? '';
        process.stderr.write(`      ${outcome.isError ? 'error: ' : ''}${firstLine.slice(0, 110)}\n`);
      },
    });
  } catch (error) {
    if (!(error instanceof ReplayFailure)) throw error;
    failure = error.message;
  } finally {
    stopBar();
    waiting?.stop();
    load.stop();
    await client.close();
  }
  if (!runId) return { task: task.id, failure: failure ?? 'the oracle replay never called budget_status, so its run is unknown' };
  const store = new Store(join(options.home, 'store.sqlite'));
  try {
    return {
      task: task.id,
      summary: summarizeRun(store, runId),
      ...(failure ? { failure: failureLine(store, runId, failure, load) } : {}),
    };
  } finally {
    store.close();
  }
}
