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
