import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { SandboxBackend } from '../../sandbox/contract.js';
import { Engine, type EngineOptions } from '../../src/core/engine.js';
import type { Run } from '../../src/core/run.js';
import { RecordingTransport } from '../../src/mcp/recording-transport.js';
import { createServer } from '../../src/mcp/server.js';
import pino from 'pino';

export interface InProcessRun {
  engine: Engine;
  run: Run;
  /** An MCP SDK client on the run's server, over an in-memory transport, recorded like any other. */
  client: Client;
  /** Ends the run as a disconnecting client does, then closes the engine. */
  close(): Promise<void>;
}

/**
 * A run served in this process: the real engine, store, recording and tools, with the given
 * sandbox backend (default bubblewrap) and no server process, build or transport between.
 * For tool behaviour, budget accounting and errors; transports and crashes need the real
 * processes (helpers/mcp.ts, helpers/http-server.ts).
 */
export async function startInProcess(options: {
  home: string;
  task?: string;
  budget?: string;
  label?: string;
  /** A full-tier task's base model (default: the task's). */
  baseModel?: string;
  backend?: SandboxBackend;
  engine?: Omit<EngineOptions, 'home'>;
}): Promise<InProcessRun> {
  const engine = await Engine.open({
    home: options.home,
    logger: pino({ level: 'silent' }),
    backend: options.backend,
    // Tool tests call as fast as the machine allows: how many a second must not decide whether they are refused.
    callsPerSecond: 1_000_000,
    ...options.engine,
  });
  const run = await engine.createRun({
    taskId: options.task ?? 'micro-gsm8k',
    budget: options.budget,
    label: options.label ?? 'test',
    baseModel: options.baseModel,
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await createServer(run).connect(new RecordingTransport(serverSide, run.record));
  const client = new Client({ name: 'a2rl-test', version: '1' });
  await client.connect(clientSide);
  return {
    engine,
    run,
    client,
    async close() {
      await client.close();
      await run.end('the client disconnected');
      await engine.close();
    },
  };
}
