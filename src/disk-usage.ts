import { lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Bytes a folder tree takes on disk: allocated blocks, so a sparse file counts what it
 * really uses; each inode once, so hard links count once; links are not followed.
 */
export function diskUsage(root: string): number {
  const seen = new Set<string>();
  let bytes = 0;
  const pending = [root];
  while (pending.length > 0) {
    const path = pending.pop()!;
    let stats;
    try {
      stats = lstatSync(path, { bigint: false });
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
  return bytes;
}
