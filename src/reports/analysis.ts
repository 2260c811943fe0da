import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { dirname } from 'node:path';
import type { BudgetLimits } from '../tasks/budget.js';
import { codeSnapshotsOf } from '../store/code-snapshots.js';
import type { Store } from '../store/store.js';
import { baselineGradeOf } from '../core/submissions.js';
import { type JobTrace, readJobTrace } from '../jobs/job-trace.js';
import { combineRoutes, type Route, type RouteReading, readRoute, routeFromTrace } from './route.js';
import { jobId } from '../core/job-ids.js';
import { type LossSeries, lossCurve, thinned } from './metrics.js';

export { detectRoute, type Route } from './route.js';

/**
 * Post-hoc summary of a run from its recorded events: metrics, one iteration per
 * submission, and the series the report draws. Deterministic: the same record gives the
 * same summary. `loadRunFacts` reads the store; everything else works on plain facts, so
 * any event sequence can be summarised (and tested) without a server.
 */

export interface ScorePair {
  public: number;
  private: number;
}

export interface RunEvent {
  t_rel_ms: number;
  kind: string;
  name: string;
  data: Record<string, unknown>;
}

/** What a job's log shows, found by the loader (the log is not part of the events). */
export interface LogSignals {
  /** A Python traceback or an uncaught error. */
  error: boolean;
  /** A loss (or any logged number) that became nan or inf. */
  nonFinite: boolean;
  /** The last line naming an error, for the report. */
  errorLine: string | null;
  /** The training loss its log's end shows (src/reports/metrics.ts). */
  loss?: LossSeries;
}

export interface RunFacts {
  run: {
    id: string;
    task: string;
    label: string | null;
    agent: string | null;
    agent_version: string | null;
    driver_model: string | null;
    state: string;
    end_reason: string | null;
    limits: BudgetLimits;
    /** Run-relative end, or null while the run is active. */
    ended_ms: number | null;
  };
  baseline: ScorePair | null;
  events: RunEvent[];
  /** Tool calls of a long run's middle, counted but not kept in `events` (see {@link keptToolCalls}); absent when none was left out. */
  elided_tools?: ToolTally;
  /** By job id. */
  logs: Record<number, LogSignals>;
  /** Each job's id as the agent, the view and the report show it (src/core/job-ids.ts), by the store's id (`loadRunFacts` gives them; facts made by hand may not, and such a job is `store job <id>`). */
  job_ids?: Record<number, string>;
  /** Code snapshot contents by tree hash, then by path inside code/. */
  code: Record<string, Record<string, string>>;
  /** What each training job's Python ran (src/jobs/job-trace.ts), by job id; absent where it left no trace. */
  traces?: Record<number, JobTrace>;
}

/** Tool calls counted as the analysis counts them. */
export interface ToolTally {
  calls: number;
  errors: number;
  refused_base_copies: number;
}

/**
 * Tool calls a report keeps whole at each end of a run; those between are only counted (the timeline shows 1,000
 * entries at each end, and events.jsonl holds them all). A run of 10⁶ calls is then read in pages into a bounded
 * memory, not parsed whole (3.2 GiB at 3·10⁵ calls before).
 */
export const keptToolCalls = 10_000;

export type Outcome = 'new_best' | 'above_baseline' | 'not_above_baseline' | 'grading_failed' | 'pending';
export type FailureType =
  'code_error' | 'training_diverged' | 'rollout_logic_wrong' | 'timeout_no_submission' | 'copy_model_fallback' | 'unknown';

export interface JobFact {
  /** The store's id, which its log and trace are kept by. */
  job_id: number;
  /** The id shown for it everywhere (src/core/job-ids.ts). */
  name: string;
  kind: string;
  command: string;
  charged: boolean;
  start_s: number;
  end_s: number | null;
  state: string;
  exit_code: number | null;
  cpu_s: number;
  compute_s: number;
  episodes_done: number | null;
  log_path: string | null;
  code_tree: string | null;
  /** A training job's route, and what it was read from; null for other jobs. */
  route: Route | null;
  route_basis: string | null;
  /** A training job's loss curve from its log's end; null for other jobs. */
  loss: LossSeries | null;
}

export interface SubmissionFact {
  submission_id: number;
  t_s: number;
  path: string;
  state: 'queued' | 'graded' | 'failed';
  scores: ScorePair | null;
  error: string | null;
  graded_s: number | null;
  code_tree: string | null;
  /** Charged compute used when it was submitted. */
  compute_s: number;
}

export interface Iteration {
  index: number;
  submission_id: number;
  t_s: number;
  scores: ScorePair | null;
  route: Route;
  /** What the route was read from: the programs the training commands started and the branches their arguments chose. */
  route_basis: string;
  uses_rollouts: boolean;
  rollout_episodes: number;
  /** `job_id`: the store's id; `name`: the id shown (src/core/job-ids.ts). */
  training_jobs: Array<{ job_id: number; name: string; state: string; command: string }>;
  code_tree: string | null;
  hyperparameters: Record<string, number | string>;
  outcome: Outcome;
  failure_type: FailureType | null;
  /** Why the failure type was chosen, from the record. */
  evidence: string | null;
}

export interface RunMetrics {
  best: (ScorePair & { submission_id: number; t_s: number }) | null;
  last: (ScorePair & { submission_id: number; t_s: number }) | null;
  improvement_best: ScorePair | null;
  improvement_last: ScorePair | null;
  submissions: number;
  valid_submissions: number;
  /** Graded / submitted; null without submissions. */
  valid_submission_rate: number | null;
  time_to_first_valid_s: number | null;
  time_to_first_improvement_s: number | null;
  time_to_best_s: number | null;
  /** Share of consecutive graded submissions whose public score did not drop; null below two. */
  monotonic_ratio: number | null;
  /** Submissions refused as the unchanged base model, plus graded ones scoring exactly the baseline on both halves. */
  base_model_copies: number;
  budget_share: { wall: number; compute: number; submissions: number; rollout_episodes: number };
  /** Wall-clock budget left when the last submission came; null without submissions. */
  gap_to_budget_end_s: number | null;
  training_jobs: number;
  training_failures: number;
  training_failure_rate: number | null;
  rollout_batches: number;
  rollout_episodes: number;
  compute_s: number;
  wall_s: number;
  tool_calls: number;
  tool_errors: number;
}

export interface RunAnalysis {
  run: RunFacts['run'];
  baseline: ScorePair | null;
  metrics: RunMetrics;
  iterations: Iteration[];
  /** Run-level failure type: null when the best submission beat the baseline (or, without a baseline grade, when there was a submission). */
  failure_type: FailureType | null;
  jobs: JobFact[];
  submissions: SubmissionFact[];
  /** Charged compute over time (run-relative seconds), for the burn-down. */
  compute_curve: Array<{ t_s: number; compute_s: number }>;
}

/** Jobs whose end counts as a failure of the agent's training (cancelled by the agent does not). */
const failedJobStates = new Set(['failed', 'timed_out', 'oom_killed', 'budget_stopped', 'lost']);

const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;
const seconds = (ms: number) => round(ms / 1000, 1);
const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);

export function analyzeRun(facts: RunFacts): RunAnalysis {
  const replayed = replayEvents(facts);
  const { jobs, submissions, computeCurve, batches } = replayed;
  const toolCalls = replayed.toolCalls + (facts.elided_tools?.calls ?? 0);
  const toolErrors = replayed.toolErrors + (facts.elided_tools?.errors ?? 0);
  const refusedBaseCopies = replayed.refusedBaseCopies + (facts.elided_tools?.refused_base_copies ?? 0);
  const lastEventMs = facts.events.at(-1)?.t_rel_ms ?? 0;
  const wallMs = facts.run.ended_ms ?? lastEventMs;
  const baseline = facts.baseline;
  const graded = submissions.filter((s) => s.state === 'graded' && s.scores);
  const withScores = (s: SubmissionFact | undefined) =>
    s ? { submission_id: s.submission_id, t_s: s.t_s, public: s.scores!.public, private: s.scores!.private } : null;
  const best = withScores(
    graded.reduce<SubmissionFact | undefined>((top, s) => (!top || s.scores!.public > top.scores!.public ? s : top), undefined),
  );
  const last = withScores(graded.at(-1));
  const diff = (s: ScorePair | null) =>
    s && baseline ? { public: round(s.public - baseline.public), private: round(s.private - baseline.private) } : null;
  const isBaseCopy = (s: SubmissionFact) =>
    !!baseline && !!s.scores && s.scores.public === baseline.public && s.scores.private === baseline.private;
  const training = jobs.filter((j) => j.kind === 'training');
  const trainingFailures = training.filter((j) => failedJobStates.has(j.state)).length;
  const finishedTraining = training.filter((j) => j.end_s !== null).length;
  const computeS = computeCurve.at(-1)?.compute_s ?? 0;
  const episodes = jobs.filter((j) => j.kind === 'rollouts').reduce((sum, j) => sum + (j.episodes_done ?? 0), 0);
  let monotonic: number | null = null;
  if (graded.length >= 2) {
    let kept = 0;
    for (let i = 1; i < graded.length; i++) if (graded[i]!.scores!.public >= graded[i - 1]!.scores!.public) kept++;
    monotonic = round(kept / (graded.length - 1), 3);
  }
  const limits = facts.run.limits;
  const share = (used: number, limit: number) => (limit > 0 ? round(Math.min(1, used / limit), 3) : 0);
  const metrics: RunMetrics = {
    best,
    last,
    improvement_best: diff(best),
    improvement_last: diff(last),
    submissions: submissions.length,
    valid_submissions: graded.length,
    valid_submission_rate: submissions.length > 0 ? round(graded.length / submissions.length, 3) : null,
    time_to_first_valid_s: graded[0]?.t_s ?? null,
    time_to_first_improvement_s: baseline ? (graded.find((s) => s.scores!.public > baseline.public)?.t_s ?? null) : null,
    time_to_best_s: best?.t_s ?? null,
    monotonic_ratio: monotonic,
    base_model_copies: refusedBaseCopies + graded.filter(isBaseCopy).length,
    budget_share: {
      wall: share(wallMs / 1000, limits.wallSeconds),
      compute: share(computeS, limits.computeSeconds),
      submissions: share(submissions.length, limits.submissions),
      rollout_episodes: share(episodes, limits.rolloutEpisodes),
    },
    gap_to_budget_end_s: submissions.length > 0 ? round(limits.wallSeconds - submissions.at(-1)!.t_s, 1) : null,
    training_jobs: training.length,
    training_failures: trainingFailures,
    training_failure_rate: finishedTraining > 0 ? round(trainingFailures / finishedTraining, 3) : null,
    rollout_batches: batches,
    rollout_episodes: episodes,
    compute_s: round(computeS),
    wall_s: seconds(wallMs),
    tool_calls: toolCalls,
    tool_errors: toolErrors,
  };
  const routeOf = routeReader(facts);
  for (const job of training) Object.assign(job, { route: routeOf(job).route, route_basis: routeOf(job).basis });
  const iterations = buildIterations(facts, jobs, submissions, baseline, isBaseCopy, routeOf);
  let failure: FailureType | null = null;
  if (submissions.length === 0) failure = 'timeout_no_submission';
  else if (baseline && !(metrics.improvement_best && metrics.improvement_best.public > 0)) {
    failure = [...iterations].reverse().find((it) => it.failure_type)?.failure_type ?? 'unknown';
  }
  return { run: facts.run, baseline, metrics, iterations, failure_type: failure, jobs, submissions, compute_curve: computeCurve };
}

/** Folds the event stream into jobs, submissions and the compute curve. */
function replayEvents({ events, job_ids: names, logs }: RunFacts) {
  const jobs = new Map<number, JobFact>();
  const submissions = new Map<number, SubmissionFact>();
  const jobCompute = new Map<number, number>();
  const computeCurve: Array<{ t_s: number; compute_s: number }> = [];
  let total = 0;
  const tools: ToolTally = { calls: 0, errors: 0, refused_base_copies: 0 };
  let batches = 0;
  const charge = (jobId: number, computeS: number, t: number) => {
    const job = jobs.get(jobId);
    if (!job?.charged) return;
    total += computeS - (jobCompute.get(jobId) ?? 0);
    jobCompute.set(jobId, computeS);
    job.compute_s = round(computeS, 3);
    computeCurve.push({ t_s: seconds(t), compute_s: round(total, 3) });
  };
  for (const event of events) {
    const d = event.data;
    const t = event.t_rel_ms;
    if (event.kind === 'tool') tally(tools, event.name, d);
    else if (event.kind === 'job' && event.name === 'started') {
      const id = num(d.job_id);
      jobs.set(id, {
        job_id: id,
        name: names?.[id] ?? `store job ${id}`,
        kind: String(d.kind),
        command: String(d.command ?? ''),
        // Grading is the server's: only agent jobs are charged (older records lack the flag).
        charged: typeof d.charged === 'boolean' ? d.charged : d.kind !== 'grading',
        start_s: seconds(t),
        end_s: null,
        state: 'running',
        exit_code: null,
        cpu_s: 0,
        compute_s: 0,
        episodes_done: null,
        log_path: typeof d.log_path === 'string' ? d.log_path : null,
        code_tree: null,
        route: null,
        route_basis: null,
        loss: logs[id]?.loss ?? null,
      });
    } else if (event.kind === 'sample') {
      const job = jobs.get(num(d.job_id));
      if (job) {
        job.cpu_s = num(d.cpu_s);
        charge(job.job_id, job.cpu_s, t);
      }
    } else if (event.kind === 'job' && event.name === 'finished') {
      const job = jobs.get(num(d.job_id));
      if (!job) continue;
      job.end_s = seconds(t);
      job.state = String(d.state);
      job.exit_code = typeof d.exit_code === 'number' ? d.exit_code : null;
      job.cpu_s = num(d.cpu_s);
      job.episodes_done = typeof d.episodes_done === 'number' ? d.episodes_done : null;
      job.log_path ??= typeof d.log_path === 'string' ? d.log_path : null;
      charge(job.job_id, num(d.gpu_s) > 0 ? num(d.gpu_s) : job.cpu_s, t);
    } else if (event.kind === 'rollouts' && event.name === 'batch') {
      batches++;
    } else if (event.kind === 'snapshot' && event.name === 'code' && typeof d.tree === 'string') {
      if (typeof d.job_id === 'number' && jobs.has(d.job_id)) jobs.get(d.job_id)!.code_tree = d.tree;
      if (typeof d.submission_id === 'number' && submissions.has(d.submission_id)) submissions.get(d.submission_id)!.code_tree = d.tree;
    } else if (event.kind === 'submission' && event.name === 'queued') {
      const id = num(d.submission_id);
      submissions.set(id, {
        submission_id: id,
        t_s: seconds(t),
        path: String(d.path ?? ''),
        state: 'queued',
        scores: null,
        error: null,
        graded_s: null,
        code_tree: null,
        compute_s: round(total, 3),
      });
    } else if (event.kind === 'submission' && (event.name === 'graded' || event.name === 'failed')) {
      const submission = submissions.get(num(d.submission_id));
      if (!submission) continue;
      submission.state = event.name;
      submission.graded_s = seconds(t);
      if (event.name === 'graded') submission.scores = { public: num(d.public_score), private: num(d.private_score) };
      else submission.error = String(d.error ?? '');
    }
  }
  return {
    jobs: [...jobs.values()],
    submissions: [...submissions.values()].sort((a, b) => a.submission_id - b.submission_id),
    computeCurve,
    toolCalls: tools.calls,
    toolErrors: tools.errors,
    refusedBaseCopies: tools.refused_base_copies,
    batches,
  };
}

function buildIterations(
  facts: RunFacts,
  jobs: JobFact[],
  submissions: SubmissionFact[],
  baseline: ScorePair | null,
  isBaseCopy: (s: SubmissionFact) => boolean,
  routeOf: (job: JobFact) => RouteReading,
): Iteration[] {
  let bestSoFar = Number.NEGATIVE_INFINITY;
  let previousS = Number.NEGATIVE_INFINITY;
  return submissions.map((submission, i) => {
    const training = jobs.filter((j) => j.kind === 'training' && j.start_s <= submission.t_s);
    const inWindow = training.filter((j) => j.start_s > previousS);
    // Submitting again from an earlier training counts that training.
    const behind = inWindow.length > 0 ? inWindow : training.slice(-1);
    const rollouts = jobs.filter((j) => j.kind === 'rollouts' && j.start_s > previousS && j.start_s <= submission.t_s);
    const rolloutEpisodes = rollouts.reduce((sum, j) => sum + (j.episodes_done ?? 0), 0);
    previousS = submission.t_s;
    const trained = behind.some((j) => j.state === 'succeeded');
    const source = behind.map((j) => trainingSource(facts, j)).join('\n');
    const copy = !trained || isBaseCopy(submission);
    // The model came from the jobs that succeeded (a failed attempt trained nothing), and of those, from the ones
    // that name the submitted folder where any does.
    const succeeded = behind.filter((j) => j.state === 'succeeded');
    const writesSubmitted = succeeded.filter((j) => namesPath(j.command, submission.path));
    const reading = combineRoutes((writesSubmitted.length > 0 ? writesSubmitted : succeeded).map(routeOf));
    const route: Route = copy ? 'copy_of_base' : reading.route;
    const routeBasis = copy
      ? trained
        ? 'scores equal the baseline on both halves'
        : 'no training job succeeded before it'
      : reading.basis;
    const hyperparameters = Object.assign({}, ...behind.map((j) => hyperparametersOf(j.command, codeOf(facts, j))));

    let outcome: Outcome;
    if (submission.state === 'failed') outcome = 'grading_failed';
    else if (!submission.scores) outcome = 'pending';
    else {
      const score = submission.scores.public;
      const above = !baseline || score > baseline.public;
      outcome = above && score > bestSoFar ? 'new_best' : above ? 'above_baseline' : 'not_above_baseline';
      bestSoFar = Math.max(bestSoFar, score);
    }
    let failure: FailureType | null = null;
    let evidence: string | null = null;
    if (outcome === 'not_above_baseline' || outcome === 'grading_failed') {
      const broken = behind.find((j) => failedJobStates.has(j.state) && facts.logs[j.job_id]?.error);
      const diverged = behind.find((j) => facts.logs[j.job_id]?.nonFinite);
      const collapsed = baseline && submission.scores && submission.scores.public < baseline.public / 2;
      if (copy) {
        failure = 'copy_model_fallback';
        evidence = trained ? 'scores equal the baseline on both halves' : 'no training job succeeded before this submission';
      } else if (diverged || collapsed) {
        failure = 'training_diverged';
        evidence = diverged ? `${diverged.name} logged nan/inf` : `score fell below half the baseline`;
      } else if (broken) {
        failure = 'code_error';
        evidence = `${broken.name} ${broken.state}: ${facts.logs[broken.job_id]?.errorLine ?? 'error in its log'}`;
      } else if (route === 'grpo' || route === 'ppo' || route === 'reinforce' || route === 'expert_iteration') {
        failure = 'rollout_logic_wrong';
        evidence = `${route} training ran but did not beat the baseline`;
      } else failure = 'unknown';
    }
    return {
      index: i + 1,
      submission_id: submission.submission_id,
      t_s: submission.t_s,
      scores: submission.scores,
      route,
      route_basis: routeBasis,
      uses_rollouts: rollouts.length > 0 || /rollouts\//.test(source),
      rollout_episodes: rolloutEpisodes,
      training_jobs: behind.map((j) => ({ job_id: j.job_id, name: j.name, state: j.state, command: j.command })),
      code_tree: submission.code_tree ?? behind.at(-1)?.code_tree ?? null,
      hyperparameters,
      outcome,
      failure_type: failure,
      evidence,
    };
  });
}

/**
 * Each training job's route, read once: from its trace where its Python left one, else from its code's words. The
 * rollout files are every path launch_rollouts wrote a batch to in this run.
 */
function routeReader(facts: RunFacts): (job: JobFact) => RouteReading {
  const rolloutFiles = new Set(
    facts.events
      .filter((e) => e.kind === 'rollouts' && e.name === 'batch' && typeof e.data.out === 'string')
      .map((e) => String(e.data.out)),
  );
  const routes = new Map<number, RouteReading>();
  return (job) => {
    if (!routes.has(job.job_id)) {
      const files = job.code_tree ? facts.code[job.code_tree] : undefined;
      const traced = routeFromTrace(facts.traces?.[job.job_id], rolloutFiles, job.command, files);
      const words = traced ? undefined : readRoute(job.command, files);
      routes.set(job.job_id, traced ?? { ...words!, basis: `${words!.basis} (no job trace)` });
    }
    return routes.get(job.job_id)!;
  };
}

/** Whether a command names a path (`output/final`, not `output/final2`). */
function namesPath(command: string, path: string): boolean {
  const clean = path.replace(/^\/workspace\//, '').replace(/\/+$/, '');
  if (!clean) return false;
  return new RegExp(`(^|[\\s='"/])${clean.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?=$|[\\s'"/])`).test(command);
}

/** The code a training job ran: the files its command names, else its whole code snapshot. */
function codeOf(facts: RunFacts, job: JobFact): string {
  const files = job.code_tree ? facts.code[job.code_tree] : undefined;
  if (!files) return '';
  const named = Object.keys(files).filter((path) => job.command.includes(`code/${path}`) || job.command.includes(path));
  return (named.length > 0 ? named : Object.keys(files)).map((path) => files[path]).join('\n');
}

function trainingSource(facts: RunFacts, job: JobFact): string {
  return `${job.command}\n${codeOf(facts, job)}`;
}

const hyperparameterNames: Record<string, string> = {
  lr: 'lr',
  learning_rate: 'lr',
  steps: 'steps',
  max_steps: 'steps',
  num_steps: 'steps',
  iterations: 'steps',
  iters: 'steps',
  epochs: 'epochs',
  num_epochs: 'epochs',
  batch_size: 'batch_size',
  bs: 'batch_size',
  warmup: 'warmup',
  warmup_steps: 'warmup',
  beta: 'kl_coef',
  kl: 'kl_coef',
  kl_coef: 'kl_coef',
  kl_beta: 'kl_coef',
  clip: 'clip',
  clip_eps: 'clip',
  clip_ratio: 'clip',
  clip_range: 'clip',
  group_size: 'group_size',
  num_generations: 'group_size',
  temperature: 'temperature',
  episodes: 'episodes',
};

const asValue = (raw: string): number | string => (/^-?\d+(\.\d+)?(e-?\d+)?$/i.test(raw) ? Number(raw) : raw);

/** Key hyperparameters: argparse defaults and UPPER_CASE constants in the code, overridden by the command's flags. */
export function hyperparametersOf(command: string, code: string): Record<string, number | string> {
  const found: Record<string, number | string> = {};
  const put = (name: string, raw: string) => {
    const key = hyperparameterNames[name.toLowerCase().replace(/-/g, '_')];
    if (key) found[key] = asValue(raw.replace(/^['"]|['"]$/g, ''));
  };
  for (const m of code.matchAll(/^\s*([A-Z][A-Z_]*)\s*=\s*([-\d.e]+)\s*(#.*)?$/gm)) put(m[1]!, m[2]!);
  for (const m of code.matchAll(/add_argument\(\s*["']--([\w-]+)["'][^)]*?default\s*=\s*([-\w.'"]+)/g)) put(m[1]!, m[2]!);
  for (const m of command.matchAll(/--([\w-]+)(?:=|\s+)([^\s-][^\s]*|-\d[^\s]*)/g)) put(m[1]!, m[2]!);
  return found;
}

const logTailBytes = 64 * 1024;

/** Reads what matters in the end of a job log; a missing log shows nothing. */
export function readLogSignals(path: string): LogSignals {
  let text = '';
  try {
    const fd = openSync(path, 'r');
    try {
      const size = fstatSync(fd).size;
      const buffer = Buffer.alloc(Math.min(size, logTailBytes));
      readSync(fd, buffer, 0, buffer.length, size - buffer.length);
      text = buffer.toString('utf8');
      // A tail starts mid-line: that part line would read as another (a step missing, a loss cut).
      if (buffer.length < size) text = text.slice(text.indexOf('\n') + 1);
    } finally {
      closeSync(fd);
    }
  } catch {
    return { error: false, nonFinite: false, errorLine: null, loss: lossCurve('') };
  }
  const errorLine = text
    .split('\n')
    .filter((line) => /^\w*(Error|Exception)\b|Traceback \(most recent call last\)/.test(line.trim()))
    .at(-1);
  // What the report draws and summary.json keeps: a few hundred points tell the curve's shape.
  const loss = thinned(lossCurve(text), 400);
  return {
    error: /Traceback \(most recent call last\)/.test(text) || errorLine !== undefined,
    nonFinite: loss.dropped > 0 || /\b(loss|reward|grad\w*)\b[^\n]*\b(nan|-?inf)\b/i.test(text),
    loss,
    errorLine: errorLine?.trim().slice(0, 200) ?? null,
  };
}

/** How the analysis counts one tool call. */
function tally(counts: ToolTally, name: string, data: Record<string, unknown>): void {
  counts.calls++;
  if (data.error !== undefined) counts.errors++;
  if (name === 'submit_artifact' && typeof data.error === 'string' && data.error.includes('base model unchanged'))
    counts.refused_base_copies++;
}

/**
 * A run's events in order, read a page at a time, with its first and last {@link keptToolCalls} tool calls whole and
 * those between only counted: every other event is kept.
 */
function keptEvents(store: Store, runId: string): { events: RunEvent[]; elided: ToolTally } {
  const kept: Array<{ order: number; event: RunEvent }> = [];
  // The last calls seen, a ring: the oldest is overwritten (and counted) by the next.
  const ring: Array<{ order: number; event: RunEvent }> = [];
  const elided: ToolTally = { calls: 0, errors: 0, refused_base_copies: 0 };
  let tools = 0;
  let order = 0;
  for (const row of store.eventPages(runId)) {
    const event = { t_rel_ms: row.t_rel_ms, kind: row.kind, name: row.name, data: JSON.parse(row.data) as Record<string, unknown> };
    const entry = { order: order++, event };
    if (event.kind !== 'tool' || tools < keptToolCalls) kept.push(entry);
    else {
      const slot = (tools - keptToolCalls) % keptToolCalls;
      const left = ring[slot];
      if (left) tally(elided, left.event.name, left.event.data);
      ring[slot] = entry;
    }
    if (event.kind === 'tool') tools++;
  }
  const start = tools > 2 * keptToolCalls ? (tools - keptToolCalls) % keptToolCalls : 0;
  const recent = [...ring.slice(start), ...ring.slice(0, start)];
  // Both lists are in order: merged, the kept calls of the end take their places among the other events.
  const events: RunEvent[] = [];
  let i = 0;
  let j = 0;
  while (i < kept.length || j < recent.length) {
    if (j >= recent.length || (i < kept.length && kept[i]!.order < recent[j]!.order)) events.push(kept[i++]!.event);
    else events.push(recent[j++]!.event);
  }
  return { events, elided };
}

/** Everything the analysis needs about one run, from the store (and the job logs and code snapshots next to it). */
export function loadRunFacts(store: Store, runId: string): RunFacts {
  const row = store.getRun(runId);
  if (!row) throw new Error(`no run ${runId} in ${store.path}`);
  const grade = baselineGradeOf(store, row);
  const { events, elided } = keptEvents(store, runId);
  const logs: RunFacts['logs'] = {};
  const traces: NonNullable<RunFacts['traces']> = {};
  const jobs = store.listJobs(runId);
  const jobIds = Object.fromEntries(jobs.map((job) => [job.id, jobId(job)]));
  for (const job of jobs.filter((j) => j.kind === 'training')) {
    logs[job.id] = readLogSignals(job.log_path);
    const trace = readJobTrace(row.dir, job.id);
    if (trace) traces[job.id] = trace;
  }
  const snapshots = codeSnapshotsOf(dirname(store.path));
  const code: RunFacts['code'] = {};
  for (const event of events) {
    const tree = event.kind === 'snapshot' ? event.data.tree : undefined;
    if (typeof tree !== 'string' || code[tree]) continue;
    try {
      const files = snapshots.read(tree).files.filter((f) => /\.(py|sh|json|ya?ml|toml|txt|cfg)$/.test(f.path));
      code[tree] = Object.fromEntries(files.map((f) => [f.path, snapshots.readFile(f).toString('utf8')]));
    } catch {
      code[tree] = {};
    }
  }
  return {
    ...(elided.calls > 0 ? { elided_tools: elided } : {}),
    run: {
      id: row.id,
      task: row.task_id,
      label: row.label,
      agent: row.agent,
      agent_version: row.agent_version,
      driver_model: row.driver_model,
      state: row.state,
      end_reason: row.end_reason,
      limits: JSON.parse(row.budget) as BudgetLimits,
      ended_ms: row.ended_at === null ? null : row.ended_at - row.created_at,
    },
    baseline: grade ? { public: grade.public_score, private: grade.private_score } : null,
    events,
    logs,
    job_ids: jobIds,
    code,
    traces,
  };
}
