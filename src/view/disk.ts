import type { RunRow } from '../store/store.js';
import { measureRunFolder } from '../../sandbox/run-storage.js';

/** How old a run's disk figure may get before the view measures it again (an ended run's is measured once). */
const refreshMs = 15_000;
/** Figures kept at most (ten pages of runs): the least recently shown go first, and are walked again if shown again. */
const maxReadings = 1000;

/**
 * Runs' disk accounts as the view shows them: the run folder measured as the server measures it (walked on the
 * disk-usage thread, off the event loop; a mounted workspace filesystem by its kernel) plus what it stored in the shared stores, as the server's budget check counts it. A page never waits for
 * a walk: it shows the last figure and the next page or push shows the new one.
 */
export class DiskAccounts {
  /** The run folder's bytes as last walked (an ended run's once), least recently shown first, at most {@link maxReadings}. */
  private readonly readings = new Map<string, { walked: number; at: number }>();
  private readonly walking = new Set<string>();

  constructor(
    /** The server's per-run quota. */
    readonly limit: number,
  ) {}

  /**
   * The last figure (undefined until the first walk ends), starting a walk when it is stale. `storedBytes`: what the
   * run put in the shared stores, from its summary (an ended run's is kept, not summed again).
   */
  reading(run: Readonly<RunRow>, storedBytes: number): { used: number; limit: number } | undefined {
    const last = this.readings.get(run.id);
    if (last) {
      // Shown now: the most recently shown, last out.
      this.readings.delete(run.id);
      this.readings.set(run.id, last);
    }
    const stale = last === undefined || (run.state === 'active' && Date.now() - last.at > refreshMs);
    if (stale && !this.walking.has(run.id)) void this.measure(run.id, run.dir);
    return last && { used: last.walked + storedBytes, limit: this.limit };
  }

  private async measure(runId: string, dir: string): Promise<void> {
    this.walking.add(runId);
    try {
      const walked = await measureRunFolder(dir);
      this.readings.delete(runId);
      this.readings.set(runId, { walked: walked.bytes, at: Date.now() });
      if (this.readings.size > maxReadings) this.readings.delete(this.readings.keys().next().value!);
    } catch {
      // A run folder removed by the operator: the view shows no figure rather than fail the page.
    } finally {
      this.walking.delete(runId);
    }
  }
}
