import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Engine } from '../../core/engine.js';
import { RecordingTransport } from '../recording-transport.js';
import type { Run } from '../../core/run.js';
import { createServer } from '../server.js';

/**
 * Serves one run over stdin/stdout until the client goes away (stdin ends) or the
 * process is told to stop; then the run ends and grading in flight finishes.
 */
export async function serveStdio(engine: Engine, run: Run): Promise<void> {
  const server = createServer(run);
  const transport = new RecordingTransport(new StdioServerTransport(), run.record);
  const closed = new Promise<string>((resolve) => {
    server.server.onclose = () => resolve('the client disconnected');
    process.stdin.once('end', () => void transport.close());
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => resolve(`the server received ${signal}`));
  });
  await server.connect(transport);
  engine.logger.info({ run: run.id, task: run.task.id }, 'serving MCP over stdio');
  const reason = await closed;
  engine.logger.info({ run: run.id, reason }, 'session over; finishing');
  await run.end(reason);
  await engine.close();
}
