import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packageRoot } from '../util/paths.js';

/** The relay a jailed stdio agent starts as its MCP server (`src/launch/relay.ts`, built). */
export const relayEntry = join(packageRoot, 'dist', 'src', 'launch', 'relay.js');

/** Refusals noted one by one in the server's log; past these only their count is. */
const maxRefusalNotes = 5;

export interface StdioBridge {
  /** The Unix socket to bind into the jail. */
  socket: string;
  /** Stops taking connections; `signal` also stops the server now (the operator's interrupt). Resolves once it exited. */
  close(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * The outside end of a jailed agent's stdio MCP server: the first connection to the socket (the relay in the jail)
 * gets the real `serve --run` here, outside the jail, joined to it stdin to stdout; that server ends the run when the
 * connection closes, then exits. So a launched run has at most one server, ever: every other connection (a second
 * relay, a probe opening the socket over and over) gets one JSON-RPC error line and is closed, starting nothing. The
 * CLIs connect once per session (a disconnect would end the run in any case). The server lives as long as the
 * connection, which the jail's processes hold: when the agent's process group is gone (its exit, the deadline's KILL,
 * the operator's interrupt, which `close(signal)` also passes to the server), the server ends the run and exits.
 */
export async function startStdioBridge(server: {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  stderrPath: string;
}): Promise<StdioBridge> {
  const dir = mkdtempSync(join(tmpdir(), 'a2rl-bridge-'));
  const socket = join(dir, 'mcp.sock');
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let refused = 0;
  // Never throws (a full disk): a note lost is better than a launcher killed inside a connection handler.
  const note = (line: string) => {
    try {
      appendFileSync(server.stderrPath, line);
    } catch {
      // The log is for the operator; the refusal itself still reaches the connection.
    }
  };
  const listener: Server = createServer({ allowHalfOpen: true }, (connection: Socket) => {
    connection.on('error', () => undefined);
    if (child) {
      const why =
        child.exitCode === null && child.signalCode === null
          ? "[CONFLICT] This run's MCP server is already connected to this agent's first connection; a launched run has one server. Nothing was started: use the first connection."
          : "[RUN_ENDED] This run's MCP session is over (its connection closed, which ended the run). Nothing was started: a2rl run starts a new run.";
      // The first few refusals with their reason, then only the count (at close): a probe in a loop cannot fill the disk.
      if (++refused <= maxRefusalNotes) note(`a2rl bridge: refused a connection: ${why}\n`);
      connection.end(`${JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: why } })}\n`);
      return;
    }
    let started: ChildProcess;
    try {
      const stderr = openSync(server.stderrPath, 'a');
      try {
        started = spawn(server.command, server.args, { env: server.env, stdio: ['pipe', 'pipe', stderr] });
      } finally {
        closeSync(stderr);
      }
    } catch (error) {
      note(`a2rl bridge: cannot start the run's MCP server: ${(error as Error).message}\n`);
      connection.destroy();
      return;
    }
    child = started;
    started.once('error', (error) => {
      note(`a2rl bridge: cannot start the run's MCP server: ${error.message}\n`);
      connection.destroy();
    });
    exited = new Promise((resolve) =>
      started.once('close', () => {
        connection.end();
        resolve();
      }),
    );
    // The agent going away ends the server's stdin: it ends the run and finishes grading, then exits.
    connection.pipe(started.stdin!);
    started.stdout!.pipe(connection);
    connection.on('error', () => started.stdin!.end());
    started.stdin!.on('error', () => undefined);
  });
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(socket, () => {
      // An accept that fails later (the agent holding every descriptor) is that connection's loss, not the launcher's end.
      listener.on('error', () => undefined);
      resolve();
    });
  });
  return {
    socket,
    close: async (signal) => {
      listener.close();
      if (signal) child?.kill(signal);
      await exited;
      if (refused > maxRefusalNotes)
        note(`a2rl bridge: refused ${refused} connections in all (the first ${maxRefusalNotes} noted above)\n`);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
