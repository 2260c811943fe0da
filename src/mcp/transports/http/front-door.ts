import { mkdtempSync, rmSync } from 'node:fs';
import type { Server as HttpServer } from 'node:http';
import { type AddressInfo, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/** Hands a connection over, at once, with the bytes already read from it; the socket is no longer this process's. */
export type PassConnection = (socket: Socket, head: Buffer) => void;

/** A path whose connections another process serves whole. */
export interface Tunnel {
  /** `/view` takes connections whose first request is for `/view`, `/view/…` or `/view?…`. */
  path: string;
  /** Resolves once that process can take connections; undefined when it cannot (the server's HTTP server then holds them). */
  open(): Promise<PassConnection | undefined>;
}

export interface FrontDoor {
  /** The public address. */
  address: AddressInfo;
  /** Stops taking connections and closes those not yet sorted (the private socket's folder goes when the server closes). */
  close(): void;
}

/** The longest first request line read before the connection goes to the HTTP server, which refuses it. */
const maxFirstLineBytes = 8192;

/** The private sockets' folders, removed when the process exits (a server that never closes its door leaves none behind). */
const folders = new Set<string>();
process.once('exit', () => folders.forEach((folder) => rmSync(folder, { recursive: true, force: true })));

/** A socket path in a folder of its own (mode 0700) for the server's HTTP server: see {@link openFrontDoor}. */
export function privateServerSocket(): string {
  const folder = mkdtempSync(join(tmpdir(), 'a2rl-server-'));
  folders.add(folder);
  return join(folder, 'server.sock');
}

/**
 * Stops a socket's handle reading from the kernel: what arrives next waits there for whoever holds the connection
 * next. A handle passed to another process while it reads drops what it reads until this process closes it, and Node
 * has no public call for this (`pause()` stops only the stream's flow, which reads ahead).
 */
function stopReading(socket: Socket): void {
  const handle = (socket as unknown as { _handle: { reading: boolean; readStop(): number } })._handle;
  handle.reading = false;
  handle.readStop();
}

/**
 * The public port (issue 49). A connection's first request line decides who holds it for its whole life: one whose
 * first request is under a tunnel's path is handed to the tunnel's process (the view's), with what was read of it, so
 * the thread that answers agents never reads, forwards or writes a page; every other connection goes to
 * `server`, which otherwise listens only on `serverSocket` ({@link privateServerSocket}), where a tunnel's process
 * sends back the requests that are not its own.
 */
export async function openFrontDoor(
  server: HttpServer,
  options: { host: string; port: number; serverSocket: string; tunnels: Tunnel[] },
): Promise<FrontDoor> {
  const { host, port, serverSocket, tunnels } = options;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(serverSocket, () => resolve());
  });
  // Reachable there until the server closes: a tunnel's process may still send back requests while it shuts down.
  const removeFolder = () => {
    rmSync(dirname(serverSocket), { recursive: true, force: true });
    folders.delete(dirname(serverSocket));
  };
  server.once('close', removeFolder);
  /** Connections being sorted: closed with the door. Those handed on are their holders'. */
  const sorting = new Set<Socket>();

  const sort = async (socket: Socket, head: Buffer, dropOnError: () => void) => {
    const target = /^[A-Z]+ (\S+)/.exec(head.toString('latin1', 0, head.indexOf(0x0a)))?.[1] ?? '';
    const tunnel = tunnels.find(({ path }) => target === path || target.startsWith(`${path}/`) || target.startsWith(`${path}?`));
    const pass = tunnel && (await tunnel.open().catch(() => undefined));
    sorting.delete(socket);
    if (socket.destroyed) return;
    if (pass) {
      // What the stream read ahead meanwhile, then not a byte more, and the socket passed in the same turn.
      const ahead = socket.read() as Buffer | null;
      stopReading(socket);
      return pass(socket, ahead ? Buffer.concat([head, ahead]) : head);
    }
    socket.off('error', dropOnError);
    // The HTTP server's parser gets the bytes read so far first, then the rest as they come.
    socket.unshift(head);
    server.emit('connection', socket);
    socket.resume();
  };

  const door = createServer({ allowHalfOpen: true, noDelay: true }, (socket) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    const dropOnError = () => void socket.destroy();
    // As long as the HTTP server would wait for a request's headers.
    const timer = setTimeout(dropOnError, server.headersTimeout);
    sorting.add(socket);
    socket.once('close', () => {
      sorting.delete(socket);
      clearTimeout(timer);
    });
    const read = (chunk: Buffer) => {
      chunks.push(chunk);
      bytes += chunk.length;
      if (!chunk.includes(0x0a) && bytes < maxFirstLineBytes) return;
      // Paused, the stream reads ahead into its buffer (at most its high-water mark), kept for whoever takes it.
      socket.off('data', read).off('end', dropOnError).pause();
      clearTimeout(timer);
      void sort(socket, Buffer.concat(chunks), dropOnError);
    };
    // A client that leaves before its first line was a connection to nobody.
    socket.on('data', read).once('end', dropOnError).on('error', dropOnError);
  });
  const close = () => {
    door.close();
    sorting.forEach((socket) => socket.destroy());
  };
  try {
    await new Promise<void>((resolve, reject) => {
      door.once('error', reject);
      door.listen(port, host, () => resolve());
    });
  } catch (error) {
    close();
    server.close();
    removeFolder();
    throw error;
  }
  return { address: door.address() as AddressInfo, close };
}
