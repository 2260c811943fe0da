import type { ViewData } from './data.js';
import { leaderboardTable } from './leaderboard-page.js';
import type { FeedBatch, LiveStream, SendEvent } from './live.js';
import { curvePoints, maxPushBytes, readLogFrom } from './log-tail.js';
import { budgetSection, cardKinds, jobCard, jobStatus, rewardPoint, submissionsTable, toolRow } from './run-page.js';
import { matchesFilters, type RunFilters, runRow } from './runs-page.js';

/**
 * What each page's stream pushes. Sections that are costlier to render (a run's budget and submissions, the runs
 * page's rows, the leaderboard) are re-rendered at most once per `flushMs` whatever the rate of events; a run
 * page's tool calls are sent as rows, its job logs as the bytes they grew by.
 */

const flushMs = 1000;
/** Active runs' rows are refreshed this often even without events, for their wall-clock bars. */
const clockRefreshMs = 15_000;
/** The leaderboard bootstraps its intervals: recomputed at most this often. */
const boardFlushMs = 5000;
/** Tool rows one push sends at most: a burst beyond it shows its newest calls. */
const maxToolRows = 100;

/** The runs page: a row for each run that changed (or was created), when it matches the page's filters. */
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
      if (summary && matchesFilters(summary, this.filters)) send('row', { id, html: runRow(summary) }, this.after);
    }
    this.dirty.clear();
  }
}

/** The leaderboard page: the table again once a run ended (or its infrastructure failure was recorded). */
export class BoardStream implements LiveStream {
  private stale = false;
  private flushedAt = 0;

  constructor(
    private readonly data: ViewData,
    public after: number,
  ) {}

  async push({ events }: FeedBatch, send: SendEvent): Promise<void> {
    if (events.some((e) => e.kind === 'run' || e.kind === 'submission')) this.stale = true;
    if (!this.stale || Date.now() - this.flushedAt < boardFlushMs) return;
    this.flushedAt = Date.now();
    this.stale = false;
    send('section', { id: 'board', html: leaderboardTable(this.data) }, this.after);
  }
}

/** A run's page: new tool calls, job cards and states, log growth, reward points, and its budget and submissions. */
export class RunStream implements LiveStream {
  private dirty = false;
  private flushedAt = 0;
  /** Where each job's log tail continues; a job leaves once its log was read to the end after it finished. */
  private readonly tails: Map<number, number>;

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
      if (chunk.text !== '' || chunk.skipped > 0) {
        send('log', {
          id,
          next: chunk.next,
          text: chunk.text,
          skipped: chunk.skipped,
          points: job.kind === 'training' ? curvePoints(chunk.text) : [],
        });
      }
      if (finished) this.tails.delete(id);
    }
  }
}
