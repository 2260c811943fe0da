import {
  type Stats,
  closeSync,
  constants,
  fchownSync,
  fstatSync,
  ftruncateSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  openSync,
  opendirSync,
  readSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import { A2rlError } from './errors.js';

/**
 * The one way the server touches a folder an agent can change (a workspace, a checkpoint in it).
 *
 * The server runs as root outside the sandbox, and the agent owns every folder below the
 * workspace's root: a path checked and then opened again by name can be swapped for a link in
 * between. So no path is ever opened by name twice here and no link is ever followed: a
 * folder is opened once as a handle, and every name under it is opened from that handle,
 * one component at a time, with O_NOFOLLOW. Node has no openat(2); `/proc/self/fd/<fd>/name`
 * is the same lookup (the kernel starts from the open folder the descriptor pins, wherever it
 * has been moved since), so each step costs one open. A swapped component is refused as a
 * link; a folder moved away while held is still the same folder; names are at most one
 * component, so no host path grows with the agent's nesting (no ENAMETOOLONG).
 */

const dirFlags = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
/** O_NONBLOCK: a FIFO the agent left in place of a file must not hang the server. */
const fileFlags = constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** Longest agent path accepted, in bytes: the kernel's PATH_MAX, so a path that could be spelled at all fits. */
export const maxPathBytes = 4096;

/**
 * A path under an open folder, looked up from that folder whatever has happened to its name
 * since. The name must be one component: no separator, no `.` or `..`, no NUL.
 */
function under(fd: number, name: string): string {
  if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) {
    throw new Error(`not a single path component: ${JSON.stringify(name)}`);
  }
  return `/proc/self/fd/${fd}/${name}`;
}

/** Whether a name read from the disk is valid UTF-8, i.e. whether the agent can spell it in a tool call. */
function isUtf8Name(name: Buffer): boolean {
  return Buffer.from(name.toString('utf8'), 'utf8').equals(name);
}

/** An agent-facing error for a failed open of `shown` (a workspace-relative path), with what to do instead. */
function openError(error: unknown, shown: string): A2rlError {
  const code = (error as NodeJS.ErrnoException).code;
  switch (code) {
    case 'ELOOP':
      return new A2rlError(
        'OUTSIDE_WORKSPACE',
        `${shown} is or passes through a symlink, and links are never followed (they may lead outside the workspace); use the real file's path.`,
      );
    case 'ENOENT':
      return new A2rlError('NOT_FOUND', `${shown} does not exist. List the workspace with list_files to see what is there.`);
    case 'ENOTDIR':
      return new A2rlError('INVALID_INPUT', `${shown} passes through a file as if it were a folder; check the path with list_files.`);
    case 'EISDIR':
      return new A2rlError('INVALID_INPUT', `${shown} is a folder; give a file path.`);
    case 'ENAMETOOLONG':
      return new A2rlError('INVALID_INPUT', `${shown} has a name longer than 255 bytes; use shorter file and folder names.`);
    case 'ENXIO':
      return new A2rlError('INVALID_INPUT', `${shown} is a pipe or socket, not a regular file; remove it and use a regular file.`);
    default:
      return new A2rlError('INVALID_INPUT', `${shown} cannot be opened (${code ?? 'error'}); it must be a regular file or folder.`);
  }
}

/**
 * An open folder. Every operation takes one name (a single path component) or a list of
 * them, and looks it up from this folder without following links; `close()` when done.
 */
/** Who a folder or file the server makes for someone else belongs to (a run's jobs: sandbox/job-identity.ts). */
export interface Owner {
  uid: number;
  gid: number;
}

export class SafeDir {
  private constructor(
    readonly fd: number,
    /** The folder as the agent names it (workspace-relative), for messages. */
    readonly shown: string,
    /** Whether it lies in a read-only part of the workspace (a mount of the benchmark's), as everything under it does. */
    readonly readOnly: boolean,
  ) {}

  /**
   * Opens a folder the server itself made and the agent cannot rename (a workspace's root, a
   * read-only mount's source). Never an agent's path: those are opened from here.
   */
  static openTrusted(hostPath: string, shown = '.', readOnly = false): SafeDir {
    return new SafeDir(openSync(hostPath, constants.O_RDONLY | constants.O_DIRECTORY), shown, readOnly);
  }

  /** Runs `use` with a trusted folder open, closing it after. */
  static withTrusted<T>(hostPath: string, use: (dir: SafeDir) => T, shown = '.', readOnly = false): T {
    const dir = SafeDir.openTrusted(hostPath, shown, readOnly);
    try {
      return use(dir);
    } finally {
      dir.close();
    }
  }

  private shownOf(name: string): string {
    return this.shown === '.' ? name : `${this.shown}/${name}`;
  }

  /** The sub-folder `name`; refused (as an A2rlError) when it is a link, a file or absent. */
  child(name: string): SafeDir {
    try {
      return new SafeDir(openSync(under(this.fd, name), dirFlags), this.shownOf(name), this.readOnly);
    } catch (error) {
      const shown = this.shownOf(name);
      const code = (error as NodeJS.ErrnoException).code;
      // O_DIRECTORY answers ENOTDIR for a link and a file alike: say which it was.
      if (code === 'ENOTDIR' || code === 'ELOOP') {
        const found = this.lstat(name);
        if (found?.isSymbolicLink()) throw openError(Object.assign(new Error(), { code: 'ELOOP' }), shown);
        if (found && !found.isDirectory()) throw new A2rlError('INVALID_INPUT', `${shown} is a file, not a folder; give a folder's path.`);
      }
      throw openError(error, shown);
    }
  }

  /**
   * The sub-folder at `names`, one component at a time; `create` makes missing folders on the way
   * (mode 0755), given to `owner` where one is named.
   */
  openDir(names: string[], options: { create?: boolean; owner?: Owner } = {}): SafeDir {
    let dir: SafeDir = this;
    try {
      for (const name of names) {
        if (options.create) dir.makeDir(name, options.owner);
        const next = dir.child(name);
        if (dir !== this) dir.close();
        dir = next;
      }
      return dir === this ? new SafeDir(openSync(`/proc/self/fd/${this.fd}/.`, dirFlags), this.shown, this.readOnly) : dir;
    } catch (error) {
      if (dir !== this) dir.close();
      throw error;
    }
  }

  /** Makes the folder `name` unless something of that name exists (whatever it is: the open that follows checks it). */
  makeDir(name: string, owner?: Owner): void {
    try {
      mkdirSync(under(this.fd, name), 0o755);
      if (owner) lchownSync(under(this.fd, name), owner.uid, owner.gid);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'EEXIST') throw openError(error, this.shownOf(name));
    }
  }

  /** Opens the regular file `name` for reading; anything else (a link, a folder, a pipe) is refused and nothing stays open. */
  openFile(name: string, shown?: string): number {
    const label = shown ?? this.shownOf(name);
    let fd: number;
    try {
      fd = openSync(under(this.fd, name), constants.O_RDONLY | fileFlags);
    } catch (error) {
      throw openError(error, label);
    }
    return checkedFile(fd, label);
  }

  /**
   * Opens the regular file `name` for writing, creating it (mode 0644) if need be; emptied
   * unless `append`. A link, folder or pipe in its place is refused and left as it was.
   */
  openFileForWrite(name: string, append: boolean): number {
    const label = this.shownOf(name);
    let fd: number;
    try {
      fd = openSync(under(this.fd, name), constants.O_WRONLY | constants.O_CREAT | fileFlags | (append ? constants.O_APPEND : 0), 0o644);
    } catch (error) {
      throw openError(error, label);
    }
    checkedFile(fd, label);
    try {
      if (!append) ftruncateSync(fd, 0);
    } catch (error) {
      closeSync(fd);
      throw error;
    }
    return fd;
  }

  /** Changes the owner of `name` itself: a link's own owner, never its target's. */
  lchown(name: string, uid: number, gid: number): void {
    lchownSync(under(this.fd, name), uid, gid);
  }

  /** What `name` is, without following it; undefined when it does not exist. */
  lstat(name: string): Stats | undefined {
    try {
      return lstatSync(under(this.fd, name));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  /**
   * The names in this folder, sorted, reading at most `max` of them: a folder of millions of
   * files costs no more than one of `max`. `truncated` says some were not read (those read
   * are then the first the file system gave, not the first in order). Names that are not
   * valid UTF-8 cannot be named in a tool call: they are counted in `unspellable`, not listed.
   */
  list(max: number): { names: string[]; truncated: boolean; unspellable: number } {
    const dir = opendirSync(`/proc/self/fd/${this.fd}`, { encoding: 'buffer' as BufferEncoding });
    const names: string[] = [];
    let unspellable = 0;
    let read = 0;
    try {
      for (let entry = dir.readSync(); entry !== null; entry = dir.readSync()) {
        if (read >= max) return { names: names.sort(), truncated: true, unspellable };
        read++;
        const raw = entry.name as unknown as Buffer;
        if (isUtf8Name(raw)) names.push(raw.toString('utf8'));
        else unspellable++;
      }
    } finally {
      dir.closeSync();
    }
    return { names: names.sort(), truncated: false, unspellable };
  }

  /**
   * Replaces `name` with `content` whole: written to a new file of a random name in this folder
   * (created exclusively, so nothing the agent planted there is written through), then
   * renamed over it (a link in its place is replaced, never followed); given to `owner` where one is named.
   */
  replaceFile(name: string, content: string, owner?: Owner): void {
    const aside = `.a2rl-${randomBytes(8).toString('hex')}.tmp`;
    let fd: number;
    try {
      fd = openSync(under(this.fd, aside), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | fileFlags, 0o644);
    } catch (error) {
      throw openError(error, this.shownOf(name));
    }
    try {
      if (owner) fchownSync(fd, owner.uid, owner.gid);
      const buffer = Buffer.from(content);
      for (let written = 0; written < buffer.length;) written += writeSync(fd, buffer, written, buffer.length - written);
      closeSync(fd);
      fd = -1;
      renameSync(under(this.fd, aside), under(this.fd, name));
    } catch (error) {
      if (fd >= 0) closeSync(fd);
      rmSync(under(this.fd, aside), { force: true });
      throw openError(error, this.shownOf(name));
    }
  }

  close(): void {
    closeSync(this.fd);
  }
}

/** Keeps an open descriptor only if it is a regular file; otherwise closes it and refuses. */
function checkedFile(fd: number, shown: string): number {
  const stats = fstatSync(fd);
  if (stats.isFile()) return fd;
  closeSync(fd);
  if (stats.isDirectory()) throw new A2rlError('INVALID_INPUT', `${shown} is a folder; give a file path.`);
  throw new A2rlError('INVALID_INPUT', `${shown} is not a regular file; remove it and use a regular file.`);
}

/** Reads at most `maxBytes` from `position` of an open file. */
export function readAt(fd: number, position: number, maxBytes: number): Buffer {
  const buffer = Buffer.alloc(Math.max(0, Math.min(maxBytes, fstatSync(fd).size - position)));
  let read = 0;
  while (read < buffer.length) {
    const n = readSync(fd, buffer, read, buffer.length - read, position + read);
    if (n === 0) break;
    read += n;
  }
  return buffer.subarray(0, read);
}

/** The last `maxBytes` of a file the server wrote itself (a job log), and whether it had more. */
export function readTail(path: string, maxBytes: number): { text: string; truncated: boolean } {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return { text: '', truncated: false };
  }
  try {
    const size = fstatSync(fd).size;
    const start = Math.max(0, size - maxBytes);
    return { text: readAt(fd, start, maxBytes).toString('utf8'), truncated: start > 0 };
  } finally {
    closeSync(fd);
  }
}
