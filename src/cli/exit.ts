import { CommanderError, InvalidArgumentError } from 'commander';
import { ReplayFailure } from '../launch/replay.js';
import { A2rlError, exitStatuses, exitStatusOf, fromSystemError, isA2rlError } from '../util/errors.js';

/** A failure as the CLI reports it: one line for stderr (empty when commander already printed it) and the exit status. */
export interface CliFailure {
  line: string;
  status: number;
}

/**
 * The CLI's one error path: every expected failure becomes one line (what, why, what to do) and the exit status of
 * its class (`exitStatuses`); only an unexpected error, a bug, says so, and its stack is printed with --debug alone.
 */
export function describeFailure(error: unknown): CliFailure {
  // Thrown from an action (not an option's parser), commander has not printed it: its message is the line.
  if (error instanceof InvalidArgumentError) return { line: error.message, status: exitStatuses.usage };
  if (error instanceof CommanderError) {
    // Commander printed its own line (an unknown option, a bad value) or the help: its status 0 stays 0.
    return { line: '', status: error.exitCode === 0 ? 0 : exitStatuses.usage };
  }
  if (error instanceof ReplayFailure) return { line: error.message, status: exitStatuses.checkFailed };
  const expected = isA2rlError(error) ? error : (fromSystemError(error) ?? fromSqliteError(error));
  if (expected) return { line: expected.message, status: exitStatusOf(expected.code) };
  const message = error instanceof Error ? error.message : String(error);
  return {
    line: `${message.split('\n')[0]} (an unexpected error: run again with --debug for its stack trace, and report it)`,
    status: exitStatuses.internal,
  };
}

/** What SQLite says of a store the CLI cannot write (a read-only file or folder, a full disk), is locked, or is damaged. */
function fromSqliteError(error: unknown): A2rlError | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !code.startsWith('SQLITE_')) return undefined;
  const message = (error as Error).message;
  if (code.startsWith('SQLITE_READONLY') || code.startsWith('SQLITE_CANTOPEN'))
    return new A2rlError(
      'READ_ONLY',
      `The store cannot be written (SQLite: ${message}): give a --home on a writable disk, or make the home and its store.sqlite writable.`,
    );
  if (code.startsWith('SQLITE_FULL'))
    return new A2rlError('BUDGET_EXHAUSTED', `The store's disk is full: free space (a2rl gc), then try again.`);
  if (code.startsWith('SQLITE_BUSY'))
    return new A2rlError('CONFLICT', `The store is locked by another a2rl process (SQLite: ${message}): try again when it is done.`);
  if (code.startsWith('SQLITE_CORRUPT') || code.startsWith('SQLITE_NOTADB'))
    return new A2rlError(
      'STORE_UNUSABLE',
      `The store cannot be read (SQLite: ${message}): restore store.sqlite from a backup, or point --home at another home.`,
    );
  // Any other (a constraint, a misuse): a2rl's bug, reported as one, never as a store to restore.
  return undefined;
}

/** Prints a failure's line (and, with --debug, the stack) and sets the exit status. */
export function reportFailure(error: unknown, debug: boolean): void {
  const { line, status } = describeFailure(error);
  if (line) process.stderr.write(`a2rl: ${line}\n`);
  if (debug && error instanceof Error && !(error instanceof CommanderError)) process.stderr.write(`${error.stack ?? ''}\n`);
  process.exitCode = status;
}

/**
 * A closed stdout pipe (`a2rl runs list | head -1`) ends the command quietly, as a process killed by SIGPIPE would,
 * instead of an uncaught EPIPE and its stack.
 */
export function endQuietlyOnClosedPipe(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EPIPE') process.exit(exitStatuses.closedPipe);
      throw error;
    });
  }
}
