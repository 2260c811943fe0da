import { closeSync, existsSync, fstatSync, lstatSync, mkdirSync, openSync, realpathSync, statSync, writeSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { A2rlError } from '../util/errors.js';
import { isInside, openForRead, openForWrite, readAt, readDirBounded } from '../util/safe-fs.js';
import type { Mount } from '../../sandbox/contract.js';

/** Where the workspace appears inside every agent sandbox. */
export const sandboxWorkspace = '/workspace';

/** A read-only part of the workspace backed by a host folder or file outside it. */
export interface WorkspaceMount {
  /** Path inside the workspace, e.g. `data` or `models/base`. */
  path: string;
  source: string;
}

export interface ResolvedPath {
  /** Normalised path relative to the workspace ('.' for its root). */
  path: string;
  hostPath: string;
  /** The host folder the path must stay inside: the workspace, or the mount it lies in. */
  base: string;
  readOnly: boolean;
}

export interface FileEntry {
  path: string;
  type: 'file' | 'dir' | 'symlink' | 'other';
  size: number;
  read_only: boolean;
}

export const maxWriteBytes = 1024 * 1024;
export const maxReadBytes = 256 * 1024;

/**
 * A run's workspace as the agent sees it: one writable host folder, with read-only
 * mounts (data, base model, libraries, instructions) laid over parts of it. File tools
 * resolve every path here, so no path, `..` or symlink leads outside.
 */
export class Workspace {
  private readonly mounts: WorkspaceMount[];

  constructor(
    readonly root: string,
    mounts: WorkspaceMount[],
  ) {
    // Longest first: `models/base` wins over `models`.
    this.mounts = [...mounts].sort((a, b) => b.path.length - a.path.length);
  }

  /**
   * Creates the writable folders and the empty mount points the sandbox binds over; a
   * mount inside another (models/base in models) gets its point in that mount's source.
   */
  prepare(writableDirs: string[]): void {
    mkdirSync(this.root, { recursive: true });
    for (const dir of writableDirs) mkdirSync(join(this.root, dir), { recursive: true });
    for (const mount of this.mounts) {
      const parent = this.mounts.find((m) => mount.path.startsWith(`${m.path}/`));
      const point = parent ? join(parent.source, mount.path.slice(parent.path.length + 1)) : join(this.root, mount.path);
      if (statSync(mount.source).isDirectory()) mkdirSync(point, { recursive: true });
      else if (!existsSync(point)) closeSync(openSync(point, 'w'));
    }
  }

  /** Mounts for a sandbox: the workspace read-write, its read-only parts over it. */
  sandboxMounts(): Mount[] {
    return [
      { source: this.root, target: sandboxWorkspace, readOnly: false },
      ...this.mounts.map((m) => ({ source: m.source, target: posix.join(sandboxWorkspace, m.path), readOnly: true })),
    ];
  }

  resolve(input: string, access: 'read' | 'write'): ResolvedPath {
    const target = this.locate(normalise(input));
    if (target.readOnly && access === 'write') {
      throw new A2rlError(
        'READ_ONLY',
        `${target.path} is read-only (provided by the benchmark). Write under code/, output/ or rollouts/ instead.`,
      );
    }
    this.assertInside(target.base, target.hostPath, target.path);
    return target;
  }

  /** Maps a normalised path to the host without following anything. */
  private locate(path: string): ResolvedPath {
    const mount = this.mounts.find((m) => path === m.path || path.startsWith(`${m.path}/`));
    const base = mount ? mount.source : this.root;
    const rest = mount ? path.slice(mount.path.length + 1) : path === '.' ? '' : path;
    return { path, base, hostPath: rest === '' ? base : join(base, ...rest.split('/')), readOnly: mount !== undefined };
  }

  list(input: string, depth: number, limit: number): { entries: FileEntry[]; truncated: boolean } {
    const start = this.resolve(input, 'read');
    if (!existsSync(start.hostPath)) throw notFound(start.path);
    if (!statSync(start.hostPath).isDirectory()) {
      throw new A2rlError('INVALID_INPUT', `${start.path} is a file, not a folder. Read it with read_file.`);
    }
    const entries: FileEntry[] = [];
    let truncated = false;
    const walk = (dir: string, level: number) => {
      const resolved = this.resolve(dir, 'read');
      const listed = readDirBounded(resolved.hostPath, limit - entries.length);
      truncated ||= listed.truncated;
      for (const name of listed.names) {
        if (entries.length >= limit) {
          truncated = true;
          return;
        }
        const path = dir === '.' ? name : `${dir}/${name}`;
        const entry = this.describe(path);
        entries.push(entry);
        if (entry.type === 'dir' && level < depth) walk(path, level + 1);
      }
    };
    walk(start.path, 1);
    return { entries, truncated };
  }

  readText(input: string, offset: number, maxBytes: number): { path: string; content: string; size: number; truncated: boolean } {
    const target = this.resolve(input, 'read');
    if (!existsSync(target.hostPath)) throw notFound(target.path);
    if (statSync(target.hostPath).isDirectory())
      throw new A2rlError('INVALID_INPUT', `${target.path} is a folder. List it with list_files.`);
    const fd = openForRead(target.hostPath, target.base, target.path);
    try {
      const size = fstatSync(fd).size;
      const buffer = readAt(fd, offset, maxBytes);
      if (buffer.includes(0)) {
        throw new A2rlError(
          'INVALID_INPUT',
          `${target.path} is a binary file (${size} bytes); read_file returns text only. Inspect it with exec, e.g. python3 or od -c | head.`,
        );
      }
      return { path: target.path, content: buffer.toString('utf8'), size, truncated: offset + buffer.length < size };
    } finally {
      closeSync(fd);
    }
  }

  writeText(input: string, content: string, append: boolean): { path: string; bytes: number; size: number } {
    const target = this.resolve(input, 'write');
    if (target.path === '.') throw new A2rlError('INVALID_INPUT', 'Give a file path such as code/train.py, not the workspace itself.');
    const bytes = Buffer.byteLength(content, 'utf8');
    if (bytes > maxWriteBytes) {
      throw new A2rlError(
        'TOO_LARGE',
        `Content is ${bytes} bytes; write_file takes at most ${maxWriteBytes}. Split it into several files, or generate large files with a script via exec.`,
      );
    }
    if (existsSync(target.hostPath) && lstatSync(target.hostPath).isDirectory()) {
      throw new A2rlError('INVALID_INPUT', `${target.path} is a folder; give a file path inside it.`);
    }
    mkdirSync(dirname(target.hostPath), { recursive: true });
    const fd = openForWrite(target.hostPath, target.base, target.path, append);
    try {
      writeSync(fd, content);
      return { path: target.path, bytes, size: fstatSync(fd).size };
    } finally {
      closeSync(fd);
    }
  }

  private describe(path: string): FileEntry {
    const target = this.locate(path);
    const stats = lstatSync(target.hostPath);
    const type = stats.isSymbolicLink() ? 'symlink' : stats.isDirectory() ? 'dir' : stats.isFile() ? 'file' : 'other';
    return { path, type, size: type === 'file' ? stats.size : 0, read_only: target.readOnly };
  }

  /** Follows symlinks on the host and refuses anything that ends outside `base`. */
  private assertInside(base: string, hostPath: string, path: string): void {
    const realBase = realpathSync(base);
    let existing = hostPath;
    while (!existsSync(existing) && existing !== dirname(existing)) existing = dirname(existing);
    let real: string;
    try {
      real = realpathSync(existing);
    } catch {
      // A dangling symlink: lstat sees it, realpath cannot follow it.
      throw new A2rlError('OUTSIDE_WORKSPACE', `${path} is a symlink that leads outside the workspace; use the real file's path.`);
    }
    if (!isInside(realBase, real)) {
      throw new A2rlError('OUTSIDE_WORKSPACE', `${path} leads outside the workspace through a symlink; use paths to real files inside it.`);
    }
    if (existsSync(hostPath) === false && lstatExists(hostPath)) {
      throw new A2rlError('OUTSIDE_WORKSPACE', `${path} is a dangling symlink; remove it or use the real file's path.`);
    }
  }
}

function lstatExists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

function notFound(path: string): A2rlError {
  return new A2rlError('NOT_FOUND', `${path} does not exist. List the workspace with list_files to see what is there.`);
}

/** Workspace-relative, normalised, inside; `/workspace/...` is accepted as the sandbox spelling of the same path. */
export function normalise(input: string): string {
  if (input.includes('\0'))
    throw new A2rlError('INVALID_INPUT', 'The path contains a NUL byte; give a plain relative path such as code/train.py.');
  let path = input.trim();
  if (path === sandboxWorkspace || path.startsWith(`${sandboxWorkspace}/`)) path = path.slice(sandboxWorkspace.length + 1) || '.';
  if (path.startsWith('/') || path.startsWith('~')) {
    throw new A2rlError(
      'OUTSIDE_WORKSPACE',
      `${input} is outside the workspace. Paths are relative to the workspace (e.g. code/train.py) or start with /workspace/.`,
    );
  }
  const normalised = posix.normalize(path === '' ? '.' : path).replace(/\/+$/, '') || '.';
  if (normalised === '..' || normalised.startsWith('../')) {
    throw new A2rlError('OUTSIDE_WORKSPACE', `${input} leads outside the workspace. Use a path inside it, such as output/final.`);
  }
  return normalised;
}
