import { lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

export interface DiskUsage {
  bytes: number;
  /** Files and folders counted. */
  entries: number;
  /** True when the walk stopped at `maxEntries`: `bytes` is then a lower bound. */
  truncated: boolean;
}

/**
 * Bytes a folder tree takes on disk: allocated blocks, so a sparse file counts what it
 * really uses; each inode once, so hard links count once; links are not followed. Stops
 * after `maxEntries`, so a tree of millions of tiny files cannot stall the caller.
 */
export function diskUsage(root: string, maxEntries = Number.POSITIVE_INFINITY): DiskUsage {
  const seen = new Set<string>();
  let bytes = 0;
  const pending = [root];
  while (pending.length > 0) {
    if (seen.size >= maxEntries) return { bytes, entries: seen.size, truncated: true };
    const path = pending.pop()!;
    let stats;
    try {
      stats = lstatSync(path);
    } catch {
      continue; // Deleted while we walked.
    }
    const inode = `${stats.dev}:${stats.ino}`;
    if (seen.has(inode)) continue;
    seen.add(inode);
    bytes += stats.blocks * 512;
    if (!stats.isDirectory()) continue;
    try {
      for (const name of readdirSync(path)) pending.push(join(path, name));
    } catch {
      // Deleted or unreadable meanwhile: what we could not list we cannot count.
    }
  }
  return { bytes, entries: seen.size, truncated: false };
}
