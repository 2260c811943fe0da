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
  const streams = pino.multistream([{ level, stream: pino.destination({ fd: 2, sync: true }) }]);
  return {
    logger: pino({ level, base: { pid: process.pid } }, streams),
    addFile: (path) => streams.add({ level, stream: pino.destination({ dest: path, sync: true, mkdir: true }) }),
  };
}
