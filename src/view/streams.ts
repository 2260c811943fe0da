import { A2rlError } from '../util/errors.js';
import type { ViewData } from './data.js';
import { boardSection, boardVersion } from './leaderboard-page.js';
import { type FeedBatch, type LiveStream, maxChannels, type SendEvent } from './live.js';
import { type CurvePoint, LossCurve } from '../reports/metrics.js';
import { curveBytes, maxPushBytes, readLogFrom } from './log-tail.js';
import { budgetSection, cardKinds, jobCard, jobStatus, rewardPoint, submissionsTable, toolRow } from './run-page.js';
import { matchesFilters, runFilters, type RunFilters, runRow } from './runs-page.js';

/**
 * What each page's stream pushes. Sections that are costlier to render (a run's budget and submissions, the runs
 * page's rows, the leaderboard) are re-rendered at most once per `flushMs` whatever the rate of events; a run
 * page's tool calls are sent as rows, its job logs as the bytes they grew by.
 */

const flushMs = 1000;
/** Active runs' rows are refreshed this often even without events, for their wall-clock bars. */
const clockRefreshMs = 15_000;
/** Tool rows one push sends at most: a burst beyond it shows its newest calls. */
const maxToolRows = 100;

/**
 * The streams one live connection asks for: `c=<tab> <page's live URL>` for each tab of a browser sharing it
 * (`/view/live?c=t1%20/view/live?after=5&c=t2%20/view/runs/r1/live?after=7&logs=3:120`); a URL without `c` is one
 * page's own stream (channel ""). A page's live URL: `/view/live?after=N[&filters]` (runs), `…&board=<the board's version it shows>` (leaderboard),
 * `/view/runs/<id>/live?after=N[&logs=<job>:<offset>,…]` (a run).
 */
export function liveStreams(data: ViewData, url: URL): Map<string, LiveStream> {
  const specs = url.searchParams.getAll('c');
  if (specs.length === 0) return new Map([['', pageStream(data, url)]]);
  if (specs.length > maxChannels) {
    throw new A2rlError('INVALID_INPUT', `${specs.length} tabs on one live connection; at most ${maxChannels}: close some tabs.`);
  }
  return new Map(
    specs.map((spec) => {
      const match = /^([\w-]{1,64}) (\/view\/\S*)$/.exec(spec);
      if (!match) throw new A2rlError('INVALID_INPUT', `c=${spec.slice(0, 80)} is not "<tab> <page's live URL>"; reload the page.`);
      return [match[1]!, pageStream(data, new URL(match[2]!, url))];
    }),
  );
}

function pageStream(data: ViewData, url: URL): LiveStream {
  const after = Number(url.searchParams.get('after') ?? 0) || 0;
  if (url.pathname === '/view/live') {
    return url.searchParams.has('board')
      ? new BoardStream(data, after, url.searchParams.get('board')!)
      : new RunsStream(data, runFilters(url), after);
  }
  const run = /^\/view\/runs\/([^/]+)\/live$/.exec(url.pathname);
  if (!run) throw new A2rlError('NOT_FOUND', `No live stream at ${url.pathname}; reload the page.`);
  let runId: string;
  try {
    runId = decodeURIComponent(run[1]!);
  } catch {
    throw new A2rlError('INVALID_INPUT', `The path "${run[1]}" is not valid percent-encoding; follow the view's own links.`);
  }
  if (!data.store.getRun(runId)) throw new A2rlError('NOT_FOUND', `No run "${runId}"; the runs are listed at /view.`);
  return new RunStream(data, runId, after, logOffsets(url));
}

/** `logs=<job id>:<offset>,…`: where the page's log tails end, so its stream continues each from there. */
function logOffsets(url: URL): Map<number, number> {
  const pairs = (url.searchParams.get('logs') ?? '').split(',').flatMap((pair) => {
    const match = /^(\d+):(\d+)$/.exec(pair);
    return match ? [[Number(match[1]), Number(match[2])] as [number, number]] : [];
  });
  return new Map(pairs);
}

/**
 * The runs page: a row for each run that changed (or was created) while it matches the page's filters, and its
 * removal (`html: null`) once it no longer does (a run that ended on a page of active runs), so a filtered page
 * stays true.
 */
export class RunsStream implements LiveStream {
  private readonly dirty = new Set<string>();
  private flushedAt = 0;
  private clockAt = Date.now();

  constructor(
    private readonly data: ViewData,
    private readonly filters: RunFilters,
    public after: number,
  ) {}

  async push({ events, newRuns }: FeedBatch, send: SendEvent): Promise<void> {
    for (const event of events) this.dirty.add(event.run_id);
    for (const id of newRuns) this.dirty.add(id);
    const now = Date.now();
    if (now - this.clockAt >= clockRefreshMs) {
      this.clockAt = now;
      for (const run of this.data.store.listActiveRuns()) this.dirty.add(run.id);
    }
    if (this.dirty.size === 0 || now - this.flushedAt < flushMs) return;
    this.flushedAt = now;
    for (const id of this.dirty) {
      const summary = this.data.summaryOf(id);
      if (!summary) continue;
      send('row', { id, html: matchesFilters(summary, this.filters) ? runRow(summary) : null }, this.after);
    }
    this.dirty.clear();
  }
}

/**
 * The leaderboard page: the board again whenever the view's differs from the one the page shows (its version): the
 * "updating" marker once a run ended or was checked, the new board once the background re-rank is done. Asking is a
 * one-row read; it never ranks (ViewData.boardState starts the re-rank).
 */
export class BoardStream implements LiveStream {
  constructor(
    private readonly data: ViewData,
    public after: number,
    private shown: string,
  ) {}

  async push(_batch: FeedBatch, send: SendEvent): Promise<void> {
    const state = this.data.boardState();
    const version = boardVersion(state);
    if (version === this.shown) return;
    this.shown = version;
    send('section', { id: 'board', html: boardSection(state) }, this.after);
  }
}

/** A run's page: new tool calls, job cards and states, log growth, reward points, and its budget and submissions. */
export class RunStream implements LiveStream {
  private dirty = false;
  private flushedAt = 0;
  /** Where each job's log tail continues; a job leaves once its log was read to the end after it finished. */
  private readonly tails: Map<number, number>;
  /** Each training job's loss curve as its pushes go on (src/reports/metrics.ts). */
  private readonly curves = new Map<number, LossCurve>();

  constructor(
    private readonly data: ViewData,
    readonly runId: string,
    public after: number,
    logOffsets: Map<number, number>,
  ) {
    this.tails = new Map(
      data.store
        .listJobs(runId)
        .filter((job) => job.state === 'running' || logOffsets.has(job.id))
        .map((job) => [job.id, logOffsets.get(job.id) ?? 0]),
    );
  }

  async push({ events }: FeedBatch, send: SendEvent): Promise<void> {
    const tools = events.filter((e) => e.kind === 'tool').slice(-maxToolRows);
    if (tools.length > 0) send('tools', { html: tools.map(toolRow).reverse().join('') }, tools.at(-1)!.id);
    for (const event of events) {
      if (event.kind !== 'job' && event.kind !== 'sample') continue;
      const jobId = (JSON.parse(event.data) as { job_id?: number }).job_id;
      const job = typeof jobId === 'number' ? this.data.store.getJob(jobId) : undefined;
      if (!job || !cardKinds.has(job.kind)) continue;
      if (event.kind === 'job' && event.name === 'started') {
        const card = await jobCard(job);
        // A card the page rendered already keeps the offset the page gave (the page ignores this card).
        if (!this.tails.has(job.id)) this.tails.set(job.id, card.offset);
        send('job', { id: job.id, card: card.html }, event.id);
      } else {
        send('job', { id: job.id, status: jobStatus(job) }, event.id);
      }
    }
    for (const event of events.filter((e) => e.kind === 'rollouts' && e.name === 'batch')) {
      const point = rewardPoint(event);
      if (point) send('reward', { point }, event.id);
    }
    if (events.length > 0) this.dirty = true;
    await this.pushLogs(send);
    if (!this.dirty || Date.now() - this.flushedAt < flushMs) return;
    this.flushedAt = Date.now();
    this.dirty = false;
    send('section', { id: 'budget', html: budgetSection(this.data, this.runId) });
    send('section', { id: 'submissions', html: submissionsTable(this.data, this.runId) });
  }

  /** What each followed job's log grew by, at most `maxPushBytes` a job: read off the event loop. */
  private async pushLogs(send: SendEvent): Promise<void> {
    for (const [id, offset] of this.tails) {
      const job = this.data.store.getJob(id);
      if (!job) continue;
      const finished = job.state !== 'running';
      const chunk = await readLogFrom(job.log_path, offset, maxPushBytes, finished);
      this.tails.set(id, chunk.next);
      // `done`: the finished job's log was read whole, so the page stops naming its offset in its live URL.
      if (chunk.text !== '' || chunk.skipped > 0 || finished) {
        let points: CurvePoint[] = [];
        if (job.kind === 'training' && chunk.text !== '') {
          const curve = await this.curveOf(job.log_path, id, offset);
          points = curve.add(chunk.text);
          if (!finished) this.data.keepCurveSeed(id, chunk.next, curve);
        }
        send('log', { id, next: chunk.next, text: chunk.text, skipped: chunk.skipped, points, done: finished });
      }
      if (finished) {
        this.tails.delete(id);
        this.curves.delete(id);
      }
    }
  }

  /**
   * A training job's loss curve, going on from the one its card drew up to `offset` (its restarts, its last step): as
   * a live stream left it there (a tab joining its browser's shared connection starts a new one), else read again.
   */
  private async curveOf(path: string, id: number, offset: number): Promise<LossCurve> {
    let curve = this.curves.get(id);
    if (curve) return curve;
    const seed = this.data.curveSeed(id, offset);
    curve = seed ?? new LossCurve();
    this.curves.set(id, curve);
    if (!seed && offset > 0) {
      // The log as the card read it: its newest `curveBytes` before `offset`, whatever has been written since cut off.
      const read = await readLogFrom(path, Math.max(0, offset - curveBytes), 2 * curveBytes, true);
      const bytes = Buffer.from(read.text);
      curve.add(bytes.subarray(0, Math.max(0, bytes.length - (read.next - offset))).toString('utf8'));
    }
    return curve;
  }
}
