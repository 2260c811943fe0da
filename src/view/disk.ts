import type { RunRow, Store } from '../store/store.js';
import { measureRunFolder } from '../../sandbox/run-storage.js';

/** How old a run's disk figure may get before the view measures it again (an ended run's is measured once). */
const refreshMs = 15_000;

/**
 * Runs' disk accounts as the view shows them: the run folder measured as the server measures it (walked on the
 * disk-usage thread, off the event loop; a mounted workspace filesystem by its kernel) plus what it stored in the shared stores, as the server's budget check counts it. A page never waits for
 * a walk: it shows the last figure and the next page or push shows the new one.
 */
export class DiskAccounts {
  private readonly readings = new Map<string, { used: number; at: number }>();
  private readonly walking = new Set<string>();

  constructor(
    private readonly store: Store,
    /** The server's per-run quota. */
    readonly limit: number,
  ) {}

  /** The last figure (undefined until the first walk ends), starting a walk when it is stale. */
  reading(run: Readonly<RunRow>): { used: number; limit: number } | undefined {
    const last = this.readings.get(run.id);
    const stale = last === undefined || (run.state === 'active' && Date.now() - last.at > refreshMs);
    if (stale && !this.walking.has(run.id)) void this.measure(run.id, run.dir);
    return last && { used: last.used, limit: this.limit };
  }

  private async measure(runId: string, dir: string): Promise<void> {
    this.walking.add(runId);
    try {
      const walked = await measureRunFolder(dir);
      this.readings.set(runId, { used: walked.bytes + this.store.storedBytes(runId), at: Date.now() });
    } catch {
      // A run folder removed by the operator: the view shows no figure rather than fail the page.
    } finally {
      this.walking.delete(runId);
    }
  }
}
