import { createHash } from 'node:crypto';
import { fchownSync, fstatSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { packageRoot } from '../src/util/paths.js';
import { SafeDir } from '../src/util/safe-fs.js';
import type { SandboxSpec } from './contract.js';

/** The host uid and gid a sandbox's jobs run as. */
export interface JobIdentity {
  uid: number;
  gid: number;
}

/**
 * Job uids come from 0x70000000 up (2^27 of them): the range systemd documents as unused, above
 * every human user, service user and the nspawn container ranges (524288–1879048191), below its
 * "foreign" range (2147352576) and below 2^31, which tools that store a uid as a signed int mishandle.
 */
export const jobIdentityRange = { first: 0x7000_0000, count: 2 ** 27 } as const;

/**
 * The identity of a sandbox's jobs, derived from its name (a run's id, a grading's label): each run
 * gets a uid of its own, the same after a restart with nothing to record, so runs cannot read each
 * other's files even past the sandbox. Undefined when this server is not root: it cannot switch
 * uid, and its jobs run as its own (unprivileged) uid.
 */
export function jobIdentity(sandboxName: string): JobIdentity | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = jobIdentityRange.first + (createHash('sha256').update(sandboxName).digest().readUInt32BE(0) % jobIdentityRange.count);
  return { uid, gid: uid };
}

/** The uid and gid a sandbox's jobs run as on the host: the run's own where the server is root, else the server's. */
export function jobUser(sandboxName: string): JobIdentity {
  return jobIdentity(sandboxName) ?? { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
}

/** Why jobs share this server's uid, for `a2rl doctor`; undefined when each run's jobs get a uid of their own. */
export function sharedIdentityReason(): string | undefined {
  if (process.getuid?.() === 0) return undefined;
  return `jobs run as this server's own uid ${process.getuid?.()} (only a server started as root gives each run an unprivileged uid of its own)`;
}

/** Deepest folder given to a job's identity; what an agent nested deeper it made itself, so it is its own already. */
const maxChownDepth = 256;

/** The worker that walks (give-folders-worker.ts), compiled: the same file whether the server runs from dist or its sources. */
const giveFoldersWorker = join(packageRoot, 'dist', 'sandbox', 'give-folders-worker.js');

/**
 * Gives a sandbox's writable mounts (a run's workspace, a grading's output folder) to its jobs'
 * identity, at each sandbox's creation: what the server wrote there as root becomes theirs. Walked in a worker
 * thread, never on the thread that answers the runs' calls; the same walk (`giveFolders`) as on it.
 */
export function giveWritableMounts(spec: SandboxSpec): Promise<void> {
  const identity = jobIdentity(spec.name);
  if (!identity) return Promise.resolve();
  const folders = spec.mounts.filter((mount) => !mount.readOnly).map((mount) => mount.source);
  return new Promise((resolve, reject) => {
    const worker = new Worker(giveFoldersWorker, { workerData: { folders, identity } });
    worker.once('error', reject);
    worker.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`giving the sandbox's writable folders to its jobs' uid stopped (exit code ${code})`)),
    );
  });
}

/** Gives folders, and everything in them, to an identity: walked by handle, links never followed (`chownTree`). */
export function giveFolders(folders: string[], identity: JobIdentity): void {
  for (const folder of folders) SafeDir.withTrusted(folder, (dir) => chownTree(dir, identity, 0));
}

/**
 * Gives a tree to a job identity. The tree may hold what an agent made in an earlier sandbox of
 * the run, so it is walked through handles and links are changed themselves, never followed
 * (src/util/safe-fs.ts): a link to a host file cannot make root give that file away.
 */
function chownTree(dir: SafeDir, identity: JobIdentity, depth: number): void {
  const own = fstatSync(dir.fd);
  if (own.uid !== identity.uid || own.gid !== identity.gid) fchownSync(dir.fd, identity.uid, identity.gid);
  for (const name of dir.list(Number.MAX_SAFE_INTEGER).names) {
    const stat = dir.lstat(name);
    if (!stat) continue;
    if (stat.isDirectory() && depth < maxChownDepth) {
      let sub: SafeDir;
      try {
        sub = dir.child(name);
      } catch {
        continue; // swapped for a link or a file meanwhile: not followed
      }
      try {
        chownTree(sub, identity, depth + 1);
      } finally {
        sub.close();
      }
    } else if (stat.isFile() && stat.nlink > 1) {
      continue; // a hard link may share its inode with a host file (made by a job of an older, root sandbox): never given away
    } else if (stat.uid !== identity.uid || stat.gid !== identity.gid) dir.lchown(name, identity.uid, identity.gid);
  }
}
