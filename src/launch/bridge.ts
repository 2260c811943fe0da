import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packageRoot } from '../util/paths.js';

/** The relay a jailed stdio agent starts as its MCP server (`src/launch/relay.ts`, built). */
export const relayEntry = join(packageRoot, 'dist', 'src', 'launch', 'relay.js');

export interface StdioBridge {
  /** The Unix socket to bind into the jail. */
  socket: string;
  /** Stops taking connections; `signal` also stops the servers now (the operator's interrupt). Resolves once every server exited. */
  close(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * The outside end of a jailed agent's stdio MCP server: each connection to the socket (the
 * relay in the jail) gets a real `serve --run` child here, outside the jail, joined to it
 * stdin to stdout. The agent's health checks connect too; each gets a server of its own.
 */
export async function startStdioBridge(server: {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  stderrPath: string;
}): Promise<StdioBridge> {
  const dir = mkdtempSync(join(tmpdir(), 'a2rl-bridge-'));
  const socket = join(dir, 'mcp.sock');
  const children = new Set<ChildProcess>();
  const exits: Array<Promise<void>> = [];
  const listener: Server = createServer({ allowHalfOpen: true }, (connection: Socket) => {
    const stderr = openSync(server.stderrPath, 'a');
    const child = spawn(server.command, server.args, { env: server.env, stdio: ['pipe', 'pipe', stderr] });
    closeSync(stderr);
    children.add(child);
    exits.push(
      new Promise((resolve) =>
        child.once('close', () => {
          children.delete(child);
          connection.end();
          resolve();
        }),
      ),
    );
    // The agent going away ends the server's stdin: it ends the run and finishes grading, then exits.
    connection.pipe(child.stdin!);
    child.stdout!.pipe(connection);
    connection.on('error', () => child.stdin!.end());
    child.stdin!.on('error', () => undefined);
  });
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(socket, () => resolve());
  });
  return {
    socket,
    close: async (signal) => {
      listener.close();
      if (signal) for (const child of children) child.kill(signal);
      await Promise.all(exits);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
