import { execFile, execFileSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  fstatSync,
  ftruncateSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  realpathSync,
  rmdirSync,
  rmSync,
  statfsSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { type DiskUsage, diskUsage, freeBytes } from '../src/util/disk-usage.js';

/** The file in a run's folder that holds its workspace's filesystem. */
export const workspaceImage = 'workspace.img';
/** The run folder's mount point of that filesystem: the workspace itself. */
export const workspaceFolder = 'workspace';

/** Most files and folders one run's filesystem holds, whatever its size (`Run`'s account keeps the same bound). */
export const maxImageInodes = 200_000;
/** Bytes of image per inode: 4 KiB blocks, so a filesystem full of files of 8 KiB runs out of both at once. */
const bytesPerInode = 8192;

/** What holds a run to its disk quota, recorded with the run (`run/storage`). */
export type StorageEnforcement = { enforcement: 'kernel'; image_bytes: number; inodes: number } | { enforcement: 'walk'; reason: string };

/**
 * Options of every mount of an image: no setuid file or device node of the agent's works from it, no atime writes,
 * deleted blocks given back to the host (the loop device punches holes in the image), no background zeroing of
 * inode tables (which would fill the sparse image with zeros), and read-only on an I/O error (a full home under the
 * sparse image) rather than writing on into a damaged filesystem.
 */
const mountOptions = 'loop,nosuid,nodev,noatime,discard,noinit_itable,errors=remount-ro';

const run = promisify(execFile);

function commandError(error: unknown): string {
  const { stderr, message } = error as { stderr?: string | Buffer; message: string };
  return (stderr?.toString().trim() || message).split('\n')[0]!;
}

let probed: { reason: string | undefined } | undefined;

/**
 * Why this host cannot hold runs to their quotas with a filesystem of their own (the disk walk then enforces them),
 * or undefined where it can: found once per process by making, mounting and removing a small image, since root
 * inside a container may still lack loop devices or the right to mount.
 */
export function kernelStorageUnavailable(): string | undefined {
  if (probed) return probed.reason;
  probed = { reason: probeKernelStorage() };
  return probed.reason;
}

function probeKernelStorage(): string | undefined {
  if (process.getuid?.() !== 0) return `the server is not root (uid ${process.getuid?.()}): only root mounts a run's filesystem image`;
  if (!existsSync('/dev/loop-control')) return 'the host has no loop devices (/dev/loop-control)';
  const dir = mkdtempSync(join(tmpdir(), 'a2rl-storage-probe-'));
  let mounted = false;
  try {
    const image = join(dir, workspaceImage);
    const target = join(dir, workspaceFolder);
    mkdirSync(target);
    try {
      makeSparseFile(image, 4 * 2 ** 20);
      execFileSync('mkfs.ext4', mkfsArgs(image, 4 * 2 ** 20), { stdio: 'pipe' });
    } catch (error) {
      return `mkfs.ext4 (e2fsprogs) cannot make an image: ${commandError(error)}`;
    }
    try {
      execFileSync('mount', ['-t', 'ext4', '-o', mountOptions, image, target], { stdio: 'pipe' });
      mounted = true;
    } catch (error) {
      return `a loop device cannot be mounted here: ${commandError(error)}`;
    }
    try {
      execFileSync('umount', [target], { stdio: 'pipe' });
      mounted = false;
    } catch (error) {
      // Left where it is: removing a folder still mounted would delete through the mount.
      return `a loop device, once mounted, could not be unmounted (${target} is left behind): ${commandError(error)}`;
    }
    return undefined;
  } finally {
    if (!mounted) rmSync(dir, { recursive: true, force: true });
  }
}

function inodesFor(bytes: number): number {
  return Math.max(1024, Math.min(maxImageInodes, Math.floor(bytes / bytesPerInode)));
}

/** Makes an empty sparse file of `bytes` for an image; it takes no space until written. */
function makeSparseFile(image: string, bytes: number): void {
  const fd = openSync(image, 'wx', 0o600);
  try {
    ftruncateSync(fd, bytes);
  } finally {
    closeSync(fd);
  }
}

/** mkfs.ext4's arguments for a workspace: no journal (scratch space), no blocks kept back for root, lazy inode tables. */
function mkfsArgs(image: string, bytes: number): string[] {
  const inodes = String(inodesFor(bytes));
  return [
    '-q',
    '-F',
    '-t',
    'ext4',
    '-O',
    '^has_journal',
    '-m',
    '0',
    '-b',
    '4096',
    '-N',
    inodes,
    '-E',
    'lazy_itable_init=1,nodiscard',
    image,
  ];
}

/** Decodes a path as `/proc/self/mountinfo` writes it (space, tab, newline and backslash as octal escapes). */
function unescapeMountPath(path: string): string {
  return path.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/** Mount points of this process's mount namespace. */
function mountPoints(): string[] {
  try {
    return readFileSync('/proc/self/mountinfo', 'utf8')
      .trim()
      .split('\n')
      .map((line) => unescapeMountPath(line.split(' ')[4] ?? ''));
  } catch {
    return [];
  }
}

/** Whether the run's workspace is its filesystem, mounted. */
export function workspaceMounted(runDir: string): boolean {
  let target: string;
  try {
    target = realpathSync(join(runDir, workspaceFolder));
  } catch {
    return false;
  }
  return mountPoints().includes(target);
}

/** Whether the run's workspace lives in an image of its own (kept after the run until `runs clean` frees it). */
export function hasWorkspaceImage(runDir: string): boolean {
  return existsSync(join(runDir, workspaceImage));
}

/**
 * Makes the run's workspace a filesystem of `quotaBytes`, mounted over the workspace folder, where the host can; the
 * kernel then refuses (`ENOSPC`) whatever would pass it: `fallocate`, sparse files filled, many small files (inodes),
 * deep paths. Elsewhere the disk walk holds the run to its quota, and the answer says why.
 */
export async function createWorkspaceImage(runDir: string, quotaBytes: number): Promise<StorageEnforcement> {
  const reason = kernelStorageUnavailable();
  if (reason) return { enforcement: 'walk', reason };
  const image = join(runDir, workspaceImage);
  try {
    makeSparseFile(image, quotaBytes);
    await run('mkfs.ext4', mkfsArgs(image, quotaBytes));
  } catch (error) {
    rmSync(image, { force: true });
    throw new Error(`the run's filesystem image could not be made: ${commandError(error)}`);
  }
  // An image that never mounted is not the run's: the next serving makes it again.
  await mountWorkspace(runDir).catch((error: unknown) => {
    rmSync(image, { force: true });
    throw error;
  });
  // The agent's workspace shows its own files only; e2fsck makes lost+found again if it ever needs one.
  rmdirSync(join(runDir, workspaceFolder, 'lost+found'));
  return { enforcement: 'kernel', image_bytes: quotaBytes, inodes: inodesFor(quotaBytes) };
}

/** How long a mount or unmount of a run's workspace waits for another process's (each takes milliseconds). */
const mountLockWaitMs = 30_000;

/**
 * Runs `use` holding the run's mount lock, so that what a process decides from the run's mount (mounted already: use
 * it; its server dead: unmount it) still holds when it acts. Without it a server's recovery that found a run's server
 * dead unmounted the workspace an adopting server had just claimed and found mounted. An exclusive lock on the run's
 * `mount.lock`, which the kernel drops however the process ends; waited for without blocking the event loop.
 */
export async function withMountLock<T>(runDir: string, use: () => Promise<T>): Promise<T> {
  const lock = new Database(join(runDir, 'mount.lock'), { timeout: 0 });
  try {
    for (const deadline = Date.now() + mountLockWaitMs; ; await sleep(20)) {
      try {
        lock.exec('BEGIN EXCLUSIVE');
        break;
      } catch (error) {
        if ((error as { code?: string }).code !== 'SQLITE_BUSY') throw error;
        if (Date.now() > deadline) {
          throw new Error(
            `another process has been mounting or unmounting the run's workspace for ${mountLockWaitMs / 1000} s (${runDir})`,
          );
        }
      }
    }
    return await use();
  } finally {
    lock.close();
  }
}

/** Mounts the run's image over its workspace folder; false when it was mounted already (by this process or another). */
export function mountWorkspace(runDir: string, readOnly = false): Promise<boolean> {
  const target = join(runDir, workspaceFolder);
  return withMountLock(runDir, async () => {
    if (workspaceMounted(runDir)) return false;
    try {
      await run('mount', ['-t', 'ext4', '-o', readOnly ? `${mountOptions},ro` : mountOptions, join(runDir, workspaceImage), target]);
    } catch (error) {
      throw new Error(`the run's filesystem image could not be mounted: ${commandError(error)}`);
    }
    return true;
  });
}

/**
 * Unmounts the run's workspace if it is mounted, and unless `keep()`, asked under the mount lock, says a process serves
 * it now. A process still holding a file there (a job's straggler) cannot keep it: the mount is detached at once and
 * its loop device freed when the last such file closes.
 */
export function unmountWorkspace(runDir: string, keep: () => boolean = () => false): Promise<void> {
  const target = join(runDir, workspaceFolder);
  if (!workspaceMounted(runDir)) return Promise.resolve();
  return withMountLock(runDir, async () => {
    if (!workspaceMounted(runDir) || keep()) return;
    await run('umount', [target]).catch(() => run('umount', ['--lazy', target]));
  });
}

/** Prefix of a reader's own read-only mount of an ended run's image, in the run's folder (`withWorkspaceReadable`). */
const readerPrefix = '.read-';

/**
 * Runs `use` with the run's workspace readable at the path it is given: a mounted one (a server serves the run) as it
 * is; an ended run's image mounted read-only for this reader alone, at a folder of its own in the run's folder, and
 * unmounted after, so that readers at once (the server's check, `a2rl runs check`) never take each other's mount down.
 * Synchronous, for readers in worker threads. The reader checks what it opened with `requireWorkspaceFilesystem`.
 */
export function withWorkspaceReadable<T>(runDir: string, use: (workspace: string) => T): T {
  const target = join(runDir, workspaceFolder);
  if (!hasWorkspaceImage(runDir) || workspaceMounted(runDir)) return use(target);
  const point = mkdtempSync(join(runDir, readerPrefix));
  try {
    execFileSync('mount', ['-t', 'ext4', '-o', `${mountOptions},ro`, join(runDir, workspaceImage), point], { stdio: 'pipe' });
  } catch (error) {
    rmdirSync(point);
    throw new Error(`the run's filesystem image could not be mounted to be read: ${commandError(error)}`);
  }
  try {
    return use(point);
  } finally {
    try {
      execFileSync('umount', [point], { stdio: 'pipe' });
    } catch {
      execFileSync('umount', ['--lazy', point], { stdio: 'pipe' });
    }
    // rmdir removes an empty folder only: one still mounted is left (EBUSY), never deleted through.
    try {
      rmdirSync(point);
    } catch {
      // left for the next server on the home (unmountStaleWorkspaces)
    }
  }
}

/**
 * Refuses (throws) a workspace folder opened as `fd` that is not the run's filesystem although the run has one: a
 * reader that found the bare mount point (its image unmounted meanwhile) would read nothing and call it clean.
 */
export function requireWorkspaceFilesystem(runDir: string, fd: number): void {
  if (hasWorkspaceImage(runDir) && fstatSync(fd).dev === statSync(runDir).dev) {
    throw new Error("the run's workspace filesystem was not mounted where it was read (its bare mount point was found)");
  }
}

/** What the run's mounted filesystem holds, as the kernel counts it (allocated blocks, fallocated ones included; inodes). */
function workspaceFilesystemUsage(runDir: string): { bytes: number; entries: number } {
  const fs = statfsSync(join(runDir, workspaceFolder));
  return { bytes: (fs.blocks - fs.bfree) * fs.bsize, entries: fs.files - fs.ffree };
}

/**
 * What a run's folder takes on disk: where its workspace filesystem is mounted, the workspace as its kernel counts it
 * and the rest walked (the image and the mount point left out); elsewhere all of it walked, an unmounted image by the
 * blocks it holds.
 */
export async function measureRunFolder(runDir: string): Promise<DiskUsage> {
  const mounted = workspaceMounted(runDir);
  const walked = await diskUsage([runDir], mounted ? [workspaceFolder, workspaceImage] : []);
  if (!mounted) return walked;
  const filesystem = workspaceFilesystemUsage(runDir);
  return { ...walked, bytes: walked.bytes + filesystem.bytes, entries: walked.entries + filesystem.entries };
}

/**
 * Frees an ended run's image: unmounted, then deleted; the run's record (events, logs, snapshots, submissions) stays.
 * Returns the bytes the image took on the host.
 */
export async function freeWorkspaceImage(runDir: string): Promise<number> {
  const image = join(runDir, workspaceImage);
  if (!existsSync(image)) return 0;
  await unmountWorkspace(runDir);
  const bytes = statSync(image).blocks * 512;
  rmSync(image);
  return bytes;
}

/**
 * Unmounts the workspaces under `home` whose runs no live process serves (`live(runId)` false): a server killed
 * (SIGKILL, a crash) leaves its mounts behind, and the next server on the home takes them down.
 */
export async function unmountStaleWorkspaces(home: string, live: (runId: string) => boolean): Promise<string[]> {
  let prefix: string;
  try {
    prefix = realpathSync(join(home, 'runs')) + '/';
  } catch {
    return [];
  }
  // The runs' workspaces, and the read-only mounts of readers (withWorkspaceReadable) that were killed while reading.
  const stale = mountPoints()
    .filter((point) => point.startsWith(prefix))
    .map((point) => point.slice(prefix.length).split('/'))
    .filter(([runId, name, ...rest]) => rest.length === 0 && (name === workspaceFolder || name?.startsWith(readerPrefix)) && !live(runId!));
  for (const [runId, name] of stale) {
    // Asked again under the run's mount lock: a server may have adopted the run (and found it mounted) since.
    if (name === workspaceFolder) await unmountWorkspace(join(home, 'runs', runId!), () => live(runId!));
    else {
      const point = join(home, 'runs', runId!, name!);
      await run('umount', ['--lazy', point]).catch(() => undefined);
      try {
        rmdirSync(point);
      } catch {
        // still mounted, or not empty: left as it is
      }
    }
  }
  return [...new Set(stale.map(([runId]) => runId!))];
}

/** Bytes as an operator reads them: MiB below 1 GiB, else GiB. */
function sizeInWords(bytes: number): string {
  return bytes < 2 ** 30 ? `${Math.round(bytes / 2 ** 20)} MiB` : `${(bytes / 2 ** 30).toFixed(1)} GiB`;
}

/**
 * How much the live runs' sparse images may still grow (each takes blocks only as its run writes, up to its size), and
 * the home's free space; undefined where the home cannot be measured.
 */
function imageRoom(home: string, liveRunDirs: string[]): { growth: number; free: number } | undefined {
  let growth = 0;
  for (const dir of liveRunDirs) {
    try {
      const image = statSync(join(dir, workspaceImage));
      growth += Math.max(0, image.size - image.blocks * 512);
    } catch {
      // No image: the walk holds that run.
    }
  }
  try {
    return { growth, free: freeBytes(home) };
  } catch {
    return undefined;
  }
}

/**
 * A warning where the live runs' sparse images may still grow by more than the home holds free, or undefined: the home
 * must hold the sum of the live runs' unfilled quotas; short of it, a run filling its image meets an I/O error (its
 * filesystem turns read-only) before its quota.
 */
export function imageOvercommitWarning(home: string, liveRunDirs: string[]): string | undefined {
  const room = imageRoom(home, liveRunDirs);
  if (!room || room.growth <= room.free) return undefined;
  return (
    `the live runs' workspace images may still grow by ${sizeInWords(room.growth)}, more than the ${sizeInWords(room.free)} free in ${home}: ` +
    `a run that fills its image first would meet I/O errors; free ended runs' images (a2rl runs clean --ended), ` +
    `free space, or serve with a smaller --disk-quota`
  );
}

/**
 * Why a new run's image of `quotaBytes` is refused, or undefined: the home's free space must cover its quota and what
 * the live runs' images may still grow, or the quota the kernel promises a run is one it cannot keep.
 */
export function imageOvercommitRefusal(home: string, liveRunDirs: string[], quotaBytes: number): string | undefined {
  const room = imageRoom(home, liveRunDirs);
  if (!room || quotaBytes + room.growth <= room.free) return undefined;
  return (
    `the home ${home} has ${sizeInWords(room.free)} free, less than this run's ${sizeInWords(quotaBytes)} quota plus the ` +
    `${sizeInWords(room.growth)} the live runs' workspace images may still grow (${sizeInWords(quotaBytes + room.growth)}); ` +
    `free space (a2rl runs clean --ended frees ended runs' images), serve with a smaller --disk-quota, or serve with ` +
    `--overcommit-disk to make the run anyway (a run that fills its image first then meets I/O errors)`
  );
}
