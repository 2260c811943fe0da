import type { Store } from '../store/store.js';

/** Who ran a launched run, as `a2rl run` recorded it in the run's events (kind `agent`). */
export interface RunAgent {
  agent: string;
  agent_version: string | null;
  driver_model: string | null;
  /** Runs launched together by one `a2rl run`: the batch id and this run's place in it (1-based). */
  batch: string;
  repeat: number;
  exit_code: number | null;
  signal: string | null;
  stopped_at_deadline: boolean | null;
  transcript: string;
}

/**
 * The agent metadata of a launched run, from its `agent` events; undefined for runs no
 * launcher started (an operator's own client). The run's agent, agent_version and
 * driver_model columns hold the part that reports group by.
 */
export function runAgentOf(store: Store, runId: string): RunAgent | undefined {
  const events = store.listEvents(runId, 'agent');
  const launched = events.find((event) => event.name === 'launched');
  if (!launched) return undefined;
  const start = JSON.parse(launched.data) as Omit<RunAgent, 'exit_code' | 'signal' | 'stopped_at_deadline'>;
  const exitedEvent = events.find((event) => event.name === 'exited');
  const exited = exitedEvent
    ? (JSON.parse(exitedEvent.data) as Pick<RunAgent, 'exit_code' | 'signal' | 'stopped_at_deadline'>)
    : { exit_code: null, signal: null, stopped_at_deadline: null };
  return {
    agent: start.agent,
    agent_version: start.agent_version,
    driver_model: start.driver_model,
    batch: start.batch,
    repeat: start.repeat,
    transcript: start.transcript,
    exit_code: exited.exit_code,
    signal: exited.signal,
    stopped_at_deadline: exited.stopped_at_deadline,
  };
}
