import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

export function sha256(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/**
 * Content hash of a set of files: sha256 over sorted `path\0sha256(content)\n` lines, so
 * the same tree hashes the same wherever it lies and whatever the files' timestamps.
 */
export function treeHash(files: ReadonlyArray<{ path: string; sha256: string }>): string {
  const lines = [...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)).map((f) => `${f.path}\0${f.sha256}\n`);
  return sha256(lines.join(''));
}

/** Tree hash of a trusted directory of ours (a task's model, grader or data). */
export function hashDirectory(dir: string): string {
  const files: Array<{ path: string; sha256: string }> = [];
  const walk = (current: string) => {
    for (const entry of readdirSync(current, { withFileTypes: true })) {
      if (entry.name === '__pycache__') continue;
      const full = join(current, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (statSync(full).isFile()) files.push({ path: relative(dir, full), sha256: sha256(readFileSync(full)) });
    }
  };
  walk(dir);
  return treeHash(files);
}
