import pino, { type Logger } from 'pino';

export type { Logger };

export interface LoggerHandle {
  logger: Logger;
  /** Also writes everything from now on to this file (e.g. the run's server.log). */
  addFile(path: string): void;
}

/**
 * Logs go to stderr (stdout is the MCP protocol in stdio mode) and to files added later.
 * Level from $A2RL_LOG_LEVEL (default info).
 */
export function createLogger(): LoggerHandle {
  const level = (process.env.A2RL_LOG_LEVEL ?? 'info') as pino.Level;
  const stderr = pino.destination({ fd: 2, sync: true });
  // Logging never throws: a line a destination cannot take (its disk is full: stderr may be a file on the home, as a
  // `serve --run`'s is) is lost there. An error event with no listener would end the server from whatever logged
  // (a job's output handler).
  stderr.on('error', () => undefined);
  const streams = pino.multistream([{ level, stream: stderr }]);
  return {
    logger: pino({ level, base: { pid: process.pid } }, streams),
    addFile: (path) => {
      const file = pino.destination({ dest: path, sync: true, mkdir: true });
      file.on('error', () => undefined); // As stderr's: a line the file cannot take is lost there, never thrown.
      streams.add({ level, stream: file });
    },
  };
}
