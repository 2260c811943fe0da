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
  | 'STORE_UNUSABLE'
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

/**
 * The CLI's exit status of each class of failure, so a script can tell them apart without reading the message
 * (docs/operating.md lists them). 1 stays what it always was: something checked failed (a replay's expectation, an
 * agent's run), and the demo's failed task is 100 + its place in `a2rl tasks` (src/cli/demo.ts).
 */
export const exitStatuses = {
  checkFailed: 1,
  usage: 2,
  notFound: 3,
  store: 4,
  unavailable: 5,
  permission: 6,
  conflict: 7,
  budget: 8,
  grading: 9,
  internal: 70,
  /** Stopped by Ctrl-C or SIGTERM before it was done (`a2rl suite run`): what a shell reports of a process SIGINT ended. */
  interrupted: 130,
  /** A closed stdout pipe (`a2rl runs list | head -1`): what a process killed by SIGPIPE reports; nothing is printed. */
  closedPipe: 141,
} as const;

const exitStatusOfCode: Record<ErrorCode, number> = {
  INVALID_INPUT: exitStatuses.usage,
  NOT_FOUND: exitStatuses.notFound,
  STORE_UNUSABLE: exitStatuses.store,
  UNAVAILABLE: exitStatuses.unavailable,
  SANDBOX_UNAVAILABLE: exitStatuses.unavailable,
  OUTSIDE_WORKSPACE: exitStatuses.permission,
  READ_ONLY: exitStatuses.permission,
  UNAUTHORIZED: exitStatuses.permission,
  FORBIDDEN: exitStatuses.permission,
  CONFLICT: exitStatuses.conflict,
  BUSY: exitStatuses.conflict,
  RUN_ENDED: exitStatuses.conflict,
  RATE_LIMITED: exitStatuses.conflict,
  TOO_LARGE: exitStatuses.budget,
  QUOTA_EXCEEDED: exitStatuses.budget,
  BUDGET_EXHAUSTED: exitStatuses.budget,
  GRADING_FAILED: exitStatuses.grading,
  INTERNAL: exitStatuses.internal,
};

export const exitStatusOf = (code: ErrorCode): number => exitStatusOfCode[code];

/**
 * An operating-system error the CLI expects (a port in use, a missing file, a folder that is a file, no permission, a
 * full or read-only disk) as the A2rlError an operator can act on; anything else is left as it is (a bug: its stack).
 */
export function fromSystemError(error: unknown): A2rlError | undefined {
  if (!(error instanceof Error)) return undefined;
  const { code, path, port, address, syscall } = error as NodeJS.ErrnoException & { port?: number; address?: string };
  const where = path ?? '';
  switch (code) {
    case 'EADDRINUSE':
      return new A2rlError(
        'UNAVAILABLE',
        `Port ${port ?? '?'} on ${address ?? 'this host'} is in use by another process: pick another with --port (0: any free port), or stop the process holding it.`,
        { cause: error },
      );
    case 'EADDRNOTAVAIL':
      return new A2rlError('UNAVAILABLE', `${address ?? 'That address'} is not an address of this host: give one it has with --host.`, {
        cause: error,
      });
    case 'ENOENT':
      return new A2rlError('NOT_FOUND', `${where || 'A file'} does not exist (${syscall ?? 'open'}): check the path.`, { cause: error });
    case 'ENOTDIR':
      return new A2rlError('INVALID_INPUT', `${where || 'A path'} lies under a file, not a folder: give a path under a folder.`, {
        cause: error,
      });
    case 'EISDIR':
      return new A2rlError('INVALID_INPUT', `${where || 'A path'} is a folder where a file was expected: give a file's path.`, {
        cause: error,
      });
    case 'EEXIST':
      return new A2rlError('CONFLICT', `${where || 'A path'} already exists: give another, or remove it first.`, { cause: error });
    case 'EACCES':
    case 'EPERM':
      return new A2rlError(
        'READ_ONLY',
        `No permission to ${syscall ?? 'use'} ${where || 'a path'}: give a path you may write, or fix its permissions.`,
        {
          cause: error,
        },
      );
    case 'EROFS':
      return new A2rlError('READ_ONLY', `${where || 'A path'} is on a read-only filesystem: give a path on a writable one.`, {
        cause: error,
      });
    case 'ENOSPC':
      return new A2rlError('BUDGET_EXHAUSTED', `The disk holding ${where || 'the home'} is full: free space (a2rl gc), then try again.`, {
        cause: error,
      });
    default:
      return undefined;
  }
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
