import { execFile } from 'node:child_process';

export interface DiskUsage {
  bytes: number;
  /** Files and folders counted. */
  entries: number;
}

/**
 * Bytes a set of folder trees takes on disk, measured by GNU du in a child process, so a
 * tree of millions of files never blocks the caller's event loop: allocated blocks (a
 * sparse file counts what it really uses), each inode once (hard links, and trees named
 * twice), links not followed. Files deleted during the walk are skipped.
 */
export function diskUsage(roots: string[]): Promise<DiskUsage> {
  // One child, two walks: the second finds the tree in the kernel's dentry cache.
  const script = 'du -s -c -B1 -- "$@" | tail -n1; du -s -c --inodes -- "$@" | tail -n1';
  return new Promise((resolve, reject) => {
    execFile('/bin/sh', ['-c', script, 'sh', ...roots], { maxBuffer: 1 << 16 }, (error, stdout) => {
      // du exits 1 when a file vanished as it walked; its totals still stand.
      const totals = stdout.split('\n').filter((line) => /^\d+\s+total$/.test(line));
      if (totals.length !== 2) {
        reject(new Error(`du could not measure ${roots.join(', ')}: ${error?.message ?? stdout}`));
        return;
      }
      const [bytes, entries] = totals.map((line) => Number.parseInt(line, 10));
      resolve({ bytes, entries });
    });
  });
}
