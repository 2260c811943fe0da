import { formatDuration } from '../util/duration.js';

/**
 * A suite's progress as plain lines (runs done, running, failed, queued, and an ETA from the runs this invocation
 * finished): one at every run's end and one every few seconds between, on a terminal or in a batch job's log alike.
 */
export class SuiteProgress {
  private running = 0;
  private done = 0;
  private failed = 0;
  private stopped = 0;
  private readonly durations: number[] = [];
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly suite: string,
    /** Runs done before this invocation. */
    private readonly doneBefore: number,
    /** Runs this invocation is to make. */
    private readonly toMake: number,
    private readonly parallel: number,
    private readonly onLine: (line: string) => void,
    everySeconds: number,
  ) {
    this.timer = setInterval(() => this.report(), everySeconds * 1000);
    this.timer.unref();
    this.report();
  }

  /** A run starts; what it returns is given back when it ends. */
  started(): number {
    this.running++;
    return Date.now();
  }

  finished(outcome: 'done' | 'failed' | 'stopped', startedAt: number): void {
    this.running--;
    this[outcome]++;
    this.durations.push(Date.now() - startedAt);
    this.report();
  }

  stop(): void {
    clearInterval(this.timer);
    this.report();
  }

  private report(): void {
    const queued = this.toMake - this.done - this.failed - this.stopped - this.running;
    const left = queued + this.running;
    const mean = this.durations.length ? this.durations.reduce((a, b) => a + b, 0) / this.durations.length : undefined;
    const eta =
      left === 0
        ? 'done'
        : mean === undefined
          ? 'ETA after the first run ends'
          : `ETA ${formatDuration((mean * left) / this.parallel / 1000)}`;
    this.onLine(
      `suite ${this.suite}: ${this.doneBefore + this.done}/${this.doneBefore + this.toMake} runs done, ${this.running} running, ` +
        `${this.failed} failed, ${queued} queued${this.stopped ? `, ${this.stopped} stopped` : ''}; ${eta}`,
    );
  }
}
