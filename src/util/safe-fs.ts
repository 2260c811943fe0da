import {
  closeSync,
  constants,
  fstatSync,
  ftruncateSync,
  openSync,
  opendirSync,
  readSync,
  realpathSync,
  statSync,
  unlinkSync,
} from 'node:fs';
import { relative, sep } from 'node:path';
import { A2rlError } from './errors.js';

/**
 * File access to folders a sandboxed agent can change while the server works on them. A
 * path checked first and opened later can be swapped for a symlink in between, so these
 * open first (never following a final symlink, never blocking on a FIFO) and then check
 * where the open file really is.
 */

export function isInside(base: string, path: string): boolean {
  const rel = relative(base, path);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !rel.startsWith(sep));
}

function openError(error: unknown, shown: string): A2rlError {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ELOOP') return new A2rlError('OUTSIDE_WORKSPACE', `${shown} is a symlink; use the real file's path.`);
  if (code === 'ENOENT')
    return new A2rlError('NOT_FOUND', `${shown} does not exist. List the workspace with list_files to see what is there.`);
  if (code === 'EISDIR') return new A2rlError('INVALID_INPUT', `${shown} is a folder; give a file path.`);
  return new A2rlError('INVALID_INPUT', `${shown} cannot be opened (${code ?? String(error)}); it must be a regular file.`);
}

/** Where an open file really is, whatever path led to it. */
function openedPath(fd: number): string {
  return realpathSync(`/proc/self/fd/${fd}`);
}

function checkOpened(fd: number, base: string, shown: string): string {
  const real = openedPath(fd);
  if (!isInside(realpathSync(base), real)) {
    closeSync(fd);
    throw new A2rlError('OUTSIDE_WORKSPACE', `${shown} leads outside the workspace through a symlink; use paths to real files inside it.`);
  }
  if (!fstatSync(fd).isFile()) {
    closeSync(fd);
    throw new A2rlError('INVALID_INPUT', `${shown} is not a regular file.`);
  }
  return real;
}

/** Opens a regular file under `base` for reading. */
export function openForRead(hostPath: string, base: string, shown: string): number {
  let fd: number;
  try {
    fd = openSync(hostPath, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    throw openError(error, shown);
  }
  checkOpened(fd, base, shown);
  return fd;
}

/** Opens (creating if need be) a regular file under `base` for writing; replaced unless `append`. */
export function openForWrite(hostPath: string, base: string, shown: string, append: boolean): number {
  const flags = constants.O_WRONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | (append ? constants.O_APPEND : 0);
  let fd: number;
  let created = false;
  try {
    fd = openSync(hostPath, flags | constants.O_CREAT | constants.O_EXCL, 0o644);
    created = true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw openError(error, shown);
    try {
      fd = openSync(hostPath, flags);
    } catch (again) {
      throw openError(again, shown);
    }
  }
  const real = openedPath(fd);
  try {
    checkOpened(fd, base, shown);
  } catch (error) {
    // The file was created through a swapped folder: take it back.
    if (created) unlinkSync(real);
    throw error;
  }
  if (!append) ftruncateSync(fd, 0);
  return fd;
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
    const size = statSync(path).size;
    const start = Math.max(0, size - maxBytes);
    return { text: readAt(fd, start, maxBytes).toString('utf8'), truncated: start > 0 };
  } finally {
    closeSync(fd);
  }
}

/**
 * The names in a folder, sorted, reading at most `max` of them: a folder of millions of
 * files costs no more than one of `max`. `truncated` says some were not read (those read
 * are then the first the file system gave, not the first in order).
 */
export function readDirBounded(path: string, max: number): { names: string[]; truncated: boolean } {
  const dir = opendirSync(path);
  const names: string[] = [];
  try {
    for (let entry = dir.readSync(); entry !== null; entry = dir.readSync()) {
      if (names.length >= max) return { names: names.sort(), truncated: true };
      names.push(entry.name);
    }
  } finally {
    dir.closeSync();
  }
  return { names: names.sort(), truncated: false };
}
