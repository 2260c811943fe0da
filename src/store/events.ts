import type { EventRow, Store } from './store.js';

/** Appends one event to a run's record; committed before the call returns. */
export type RecordEvent = (kind: string, name: string, data: unknown) => void;

export function eventRecorder(store: Store, runId: string, runStartedAt: number): RecordEvent {
  return (kind, name, data) => {
    const at = Date.now();
    store.insertEvent({ run_id: runId, at, t_rel_ms: at - runStartedAt, kind, name, data: JSON.stringify(data ?? null) });
  };
}

/**
 * Group commit for a server answering many sessions at once: the events recorded during one
 * turn of the event loop are committed in one transaction at its end (setImmediate), and each
 * `record` resolves once its event is committed. A caller that waits for it before answering
 * keeps the promise of `RecordEvent` (on disk before the answer leaves) while many answers
 * share one commit.
 */
export class GroupCommit {
  private pending: Array<Omit<EventRow, 'id'>> = [];
  private committed: Promise<void> | undefined;

  constructor(private readonly store: Store) {}

  record(runId: string, runStartedAt: number, kind: string, name: string, data: unknown): Promise<void> {
    const at = Date.now();
    this.pending.push({ run_id: runId, at, t_rel_ms: at - runStartedAt, kind, name, data: JSON.stringify(data ?? null) });
    this.committed ??= new Promise((resolve, reject) =>
      setImmediate(() => {
        const events = this.pending;
        this.pending = [];
        this.committed = undefined;
        try {
          this.store.insertEvents(events);
          resolve();
        } catch (error) {
          reject(error as Error);
        }
      }),
    );
    return this.committed;
  }
}
