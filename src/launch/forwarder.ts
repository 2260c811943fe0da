/**
 * The first process of a jailed agent, in the jail's own network namespace (only a loopback):
 * it listens on each loopback address the agent was given (its model API, its run's MCP
 * endpoint, the launcher's proxy) and joins each connection to the Unix socket bound into the
 * jail for it, behind which the launcher reaches the real endpoint; then it runs the agent and
 * exits as the agent did. Standalone on purpose (node: modules only): the jail holds this file
 * and nothing else of a2rl. Usage: `node forwarder.js FORWARDS_JSON -- COMMAND ARG…`, where
 * FORWARDS_JSON is `[{"host": "127.0.0.1", "port": 8080, "socket": "/run/a2rl/net/0.sock"}, …]`.
 */
import { spawn } from 'node:child_process';
import { connect, createServer } from 'node:net';

interface Forward {
  host: string;
  port: number;
  socket: string;
}

const separator = process.argv.indexOf('--');
if (separator !== 3 || process.argv.length < 5) {
  process.stderr.write('a2rl forwarder: usage: node forwarder.js FORWARDS_JSON -- COMMAND ARG…\n');
  process.exit(2);
}
const forwards = JSON.parse(process.argv[2]!) as Forward[];
const [command, ...args] = process.argv.slice(separator + 1);

function listen(forward: Forward): Promise<void> {
  const server = createServer({ allowHalfOpen: true }, (client) => {
    const upstream = connect({ path: forward.socket, allowHalfOpen: true });
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  return new Promise((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      // A jail without IPv6 has no ::1: no agent in it can connect there, so there is nothing to forward.
      if (forward.host === '::1' && ['EADDRNOTAVAIL', 'EAFNOSUPPORT'].includes(error.code ?? '')) resolve();
      else reject(error);
    });
    server.listen(forward.port, forward.host, () => resolve());
  });
}

try {
  await Promise.all(forwards.map(listen));
} catch (error) {
  process.stderr.write(`a2rl forwarder: cannot listen in the jail: ${(error as Error).message}\n`);
  process.exit(1);
}

// The launcher signals the whole process group, the agent included: this process waits for the agent and ends as it did.
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => undefined);
const agent = spawn(command!, args, { stdio: 'inherit' });
agent.once('error', (error) => {
  process.stderr.write(`a2rl forwarder: cannot start ${command}: ${error.message}\n`);
  process.exit(127);
});
agent.once('exit', (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  }
  process.exit(code ?? 1);
});
