import type { Store } from './store.js';

/** Appends one event to a run's record; committed before the call returns. */
export type RecordEvent = (kind: string, name: string, data: unknown) => void;

export function eventRecorder(store: Store, runId: string, runStartedAt: number): RecordEvent {
  return (kind, name, data) => {
    const at = Date.now();
    store.insertEvent({ run_id: runId, at, t_rel_ms: at - runStartedAt, kind, name, data: JSON.stringify(data ?? null) });
  };
}
