/** Why an operation was refused; tools report it as `[CODE] message`. */
export type ErrorCode =
  | 'INVALID_INPUT'
  | 'NOT_FOUND'
  | 'OUTSIDE_WORKSPACE'
  | 'READ_ONLY'
  | 'TOO_LARGE'
  | 'QUOTA_EXCEEDED'
  | 'BUDGET_EXHAUSTED'
  | 'RUN_ENDED'
  | 'CONFLICT'
  | 'BUSY'
  | 'RATE_LIMITED'
  | 'UNAUTHORIZED'
  | 'FORBIDDEN'
  | 'UNAVAILABLE'
  | 'SANDBOX_UNAVAILABLE'
  | 'GRADING_FAILED'
  | 'INTERNAL';

/**
 * The one error class of a2rl-bench. `message` is written for whoever must act on it (an
 * agent or an operator): what was wrong and what to do instead.
 */
export class A2rlError extends Error {
  override readonly name = 'A2rlError';

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: { cause?: unknown } = {},
  ) {
    super(message, { cause: options.cause });
  }
}

export function isA2rlError(error: unknown, code?: ErrorCode): error is A2rlError {
  return error instanceof A2rlError && (code === undefined || error.code === code);
}

/** A host folder and how an agent sees it: `agent` is its path in the sandbox, or undefined where the agent sees none of it. */
export interface HostPathView {
  host: string;
  agent?: string;
}

/**
 * A message as an agent may read it: a path under one of the host folders is written as the agent sees it (the
 * workspace as /workspace/…), or, where the agent sees none of it (the server's home, the package), left out. A
 * message that names host paths tells an agent where the store, other runs and the evaluation data lie.
 */
export function inAgentView(message: string, views: readonly HostPathView[]): string {
  // Longest first: the workspace lies inside the server's home, and must be matched as itself.
  const sorted = [...views].filter((view) => view.host.length > 1).sort((a, b) => b.host.length - a.host.length);
  if (sorted.length === 0) return message;
  const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  // A folder's path, as itself or followed by more of the path, up to what ends a path in a message (a space, a quote).
  const pattern = new RegExp(`(${sorted.map((view) => escape(view.host)).join('|')})((?:/[^\\s'"\`,;)\\]]*)?)(?![^/\\s'"\`,;)\\]])`, 'g');
  return message.replace(pattern, (_, host: string, rest: string) => {
    const agent = sorted.find((view) => view.host === host)!.agent;
    return agent === undefined ? '(a server path)' : `${agent}${rest}`;
  });
}
