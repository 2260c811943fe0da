import {
  closeSync,
  type Dirent,
  existsSync,
  fchownSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  statSync,
  writeSync,
} from 'node:fs';
import { join, posix } from 'node:path';
import { A2rlError, isA2rlError } from '../util/errors.js';
import { type Owner, SafeDir, maxPathBytes, readAt } from '../util/safe-fs.js';
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
  /** The trusted host folder (or file) the path starts from: the workspace's root, or the read-only mount it lies in. */
  base: string;
  /** The workspace-relative path of `base` ('.' for the root). */
  basePath: string;
  /** The path's components under `base`, looked up one at a time without following links. */
  names: string[];
  readOnly: boolean;
}

export interface FileEntry {
  path: string;
  type: 'file' | 'dir' | 'symlink' | 'other';
  size: number;
  read_only: boolean;
}

export const maxWriteBytes = 1024 * 1024;
/** Deepest path a tool takes: far inside the disk walk's depth, so no tool can make a tree the disk account cannot measure. */
export const maxPathDepth = 64;
export const maxReadBytes = 256 * 1024;

/**
 * A run's workspace as the agent sees it: one writable host folder, with read-only
 * mounts (data, base model, libraries, instructions) laid over parts of it. Every path is
 * resolved here and opened through `SafeDir` (src/util/safe-fs.ts): from a handle on the
 * workspace's root or a mount's source, one component at a time, never following a link,
 * so no path, `..`, symlink or swapped folder leads outside.
 */
export class Workspace {
  private readonly mounts: WorkspaceMount[];

  /**
   * @param owner the run's jobs' host identity (sandbox/job-identity.ts), where they have one of
   * their own: what the server writes here (write_file, rollouts) is given to them, so their jobs can change it.
   */
  constructor(
    readonly root: string,
    mounts: WorkspaceMount[],
    private readonly owner?: Owner,
  ) {
    // Longest first: `models/base` wins over `models`.
    this.mounts = [...mounts].sort((a, b) => b.path.length - a.path.length);
  }

  /**
   * Creates the writable folders and the empty mount points the sandbox binds over; a
   * mount inside another (models/base in models) gets its point in that mount's source.
   * Runs when the run is created, and in a run's new filesystem image, before any agent can act in it: it follows links.
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

  /**
   * Whether the workspace holds nothing beyond what {@link prepare} makes (empty folders and files of its names, or
   * nothing at all): a workspace never served yet. Read without following links; a link is something.
   */
  holdsOnlyPrepared(writableDirs: string[]): boolean {
    const prepared = new Set([...writableDirs, ...this.mounts.filter((m) => !m.path.includes('/')).map((m) => m.path)]);
    let entries: Dirent[];
    try {
      entries = readdirSync(this.root, { withFileTypes: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return true;
      throw error;
    }
    return entries.every((entry) => {
      if (!prepared.has(entry.name)) return false;
      const path = join(this.root, entry.name);
      if (entry.isDirectory()) return readdirSync(path).length === 0;
      return entry.isFile() && lstatSync(path).size === 0;
    });
  }

  /** Mounts for a sandbox: the workspace read-write, its read-only parts over it. */
  sandboxMounts(): Mount[] {
    return [
      { source: this.root, target: sandboxWorkspace, readOnly: false },
      ...this.mounts.map((m) => ({ source: m.source, target: posix.join(sandboxWorkspace, m.path), readOnly: true })),
    ];
  }

  /** Where a path lies (nothing is opened yet); a write into a read-only part is refused. */
  resolve(input: string, access: 'read' | 'write'): ResolvedPath {
    const path = normalise(input);
    const mount = this.mounts.find((m) => path === m.path || path.startsWith(`${m.path}/`));
    const rest = mount ? path.slice(mount.path.length + 1) : path === '.' ? '' : path;
    const target: ResolvedPath = {
      path,
      base: mount ? mount.source : this.root,
      basePath: mount ? mount.path : '.',
      names: rest === '' ? [] : rest.split('/'),
      readOnly: mount !== undefined,
    };
    // A read-only mount that is a file (instructions.md) has nothing under it.
    if (mount && target.names.length > 0 && !statSync(mount.source).isDirectory()) {
      throw new A2rlError(
        'INVALID_INPUT',
        `${mount.path} is a file, not a folder; nothing lies under it. Give a path such as ${mount.path}.`,
      );
    }
    if (target.readOnly && access === 'write') {
      throw new A2rlError(
        'READ_ONLY',
        `${target.path} is read-only (provided by the benchmark). Write under code/, output/ or rollouts/ instead.`,
      );
    }
    return target;
  }

  /** Opens the folder at a path; the caller closes it. Refused when the path is a file, a link or absent. */
  openDir(input: string | ResolvedPath): SafeDir {
    const target = typeof input === 'string' ? this.resolve(input, 'read') : input;
    if (target.names.length === 0 && !statSync(target.base).isDirectory()) {
      throw new A2rlError('INVALID_INPUT', `${target.path} is a file, not a folder. Read it with read_file.`);
    }
    return SafeDir.withTrusted(target.base, (base) => base.openDir(target.names), target.basePath, target.readOnly);
  }

  /** Runs `use` with the folder that holds a path's last component open; the path is never the base itself. */
  private withParent<T>(target: ResolvedPath, create: boolean, use: (parent: SafeDir, name: string) => T): T {
    const parent = SafeDir.withTrusted(
      target.base,
      (base) => base.openDir(target.names.slice(0, -1), { create, owner: this.owner }),
      target.basePath,
      target.readOnly,
    );
    try {
      return use(parent, target.names.at(-1)!);
    } finally {
      parent.close();
    }
  }

  /** Opens a regular file for reading (a read-only mount that is a file, such as instructions.md, included). */
  openFile(input: string | ResolvedPath): number {
    const target = typeof input === 'string' ? this.resolve(input, 'read') : input;
    if (target.names.length > 0) return this.withParent(target, false, (parent, name) => parent.openFile(name));
    if (statSync(target.base).isDirectory()) throw new A2rlError('INVALID_INPUT', `${target.path} is a folder. List it with list_files.`);
    return openSync(target.base, 'r');
  }

  /** At most `maxBytes` of a regular file, from its start. */
  readBytes(input: string, maxBytes: number): Buffer {
    const fd = this.openFile(input);
    try {
      return readAt(fd, 0, maxBytes);
    } finally {
      closeSync(fd);
    }
  }

  list(input: string, depth: number, limit: number): { entries: FileEntry[]; truncated: boolean; unspellable: number } {
    const start = this.resolve(input, 'read');
    const entries: FileEntry[] = [];
    let truncated = false;
    let unspellable = 0;
    const walk = (dir: SafeDir, path: string, level: number) => {
      const listed = dir.list(limit - entries.length);
      truncated ||= listed.truncated;
      unspellable += listed.unspellable;
      for (const name of listed.names) {
        if (entries.length >= limit) {
          truncated = true;
          return;
        }
        const child = path === '.' ? name : `${path}/${name}`;
        const mount = this.mounts.find((m) => m.path === child);
        const stats = mount ? statSync(mount.source) : dir.lstat(name);
        if (!stats) continue; // deleted while listed
        const type = stats.isSymbolicLink() ? 'symlink' : stats.isDirectory() ? 'dir' : stats.isFile() ? 'file' : 'other';
        entries.push({ path: child, type, size: type === 'file' ? stats.size : 0, read_only: mount !== undefined || dir.readOnly });
        if (type !== 'dir' || level >= depth) continue;
        let sub: SafeDir;
        try {
          sub = mount ? SafeDir.openTrusted(mount.source, child, true) : dir.child(name);
        } catch (error) {
          if (isA2rlError(error)) continue; // swapped for a link or a file while listed: not followed
          throw error;
        }
        try {
          walk(sub, child, level + 1);
        } finally {
          sub.close();
        }
      }
    };
    const top = this.openDir(start);
    try {
      walk(top, start.path, 1);
    } finally {
      top.close();
    }
    return { entries, truncated, unspellable };
  }

  readText(input: string, offset: number, maxBytes: number): { path: string; content: string; size: number; truncated: boolean } {
    const target = this.resolve(input, 'read');
    const fd = this.openFile(target);
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
    return this.withParent(target, true, (parent, name) => {
      const fd = parent.openFileForWrite(name, append);
      try {
        if (this.owner) fchownSync(fd, this.owner.uid, this.owner.gid);
        writeSync(fd, content);
        return { path: target.path, bytes, size: fstatSync(fd).size };
      } finally {
        closeSync(fd);
      }
    });
  }

  /** Replaces a workspace file whole (written aside, then renamed over it): the server's rewrite of a file the agent may hold open. */
  replaceFile(input: string, content: string): void {
    const target = this.resolve(input, 'write');
    this.withParent(target, false, (parent, name) => parent.replaceFile(name, content, this.owner));
  }
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
  if (Buffer.byteLength(normalised) > maxPathBytes) {
    throw new A2rlError(
      'INVALID_INPUT',
      `The path is ${Buffer.byteLength(normalised)} bytes long; paths are at most ${maxPathBytes}. Use shorter folder and file names.`,
    );
  }
  if (normalised.split('/').length > maxPathDepth) {
    throw new A2rlError(
      'INVALID_INPUT',
      `The path nests ${normalised.split('/').length} folders deep; paths are at most ${maxPathDepth} deep. Use a flatter layout.`,
    );
  }
  if (normalised === '..' || normalised.startsWith('../')) {
    throw new A2rlError('OUTSIDE_WORKSPACE', `${input} leads outside the workspace. Use a path inside it, such as output/final.`);
  }
  return normalised;
}
