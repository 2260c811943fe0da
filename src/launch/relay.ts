/**
 * The stdio MCP server a jailed agent starts: it joins its stdin and stdout to the launcher's
 * bridge socket (bound into the jail), behind which the launcher runs the real `serve --run`
 * outside the jail. Standalone on purpose (node: modules only): the jail holds this file and
 * nothing else of a2rl. Usage: `node relay.js SOCKET`.
 */
import { connect } from 'node:net';

const socketPath = process.argv[2];
if (!socketPath) {
  process.stderr.write('a2rl relay: usage: node relay.js SOCKET\n');
  process.exit(2);
}
const socket = connect({ path: socketPath, allowHalfOpen: true });
socket.once('error', (error) => {
  process.stderr.write(`a2rl relay: cannot reach the MCP bridge at ${socketPath}: ${error.message}\n`);
  process.exit(1);
});
process.stdin.pipe(socket);
socket.pipe(process.stdout);
socket.once('close', () => process.exit(0));
