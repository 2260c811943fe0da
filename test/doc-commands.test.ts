import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../src/util/paths.js';

/**
 * Issue 51, "commands as written work": every shell block of the README and docs/*.md runs as written against the
 * built CLI, so the docs cannot drift from the code. A block CI cannot run (it needs a model API key, a GPU, a
 * cluster, a Docker engine, minutes of work, a value only you have, or it is a server that runs until stopped) is
 * marked by `<!-- doc-commands: skip (the reason) -->` on the line right before its fence; the reason is the skipped
 * test's name.
 */

const shellLanguages = new Set(['sh', 'bash', 'console', 'shell']);
const marker = /^\s*<!--\s*doc-commands:(.*?)-->\s*$/;
const skipMarker = /^\s*skip\s+\((.+)\)\s*$/;
/** Per block: one CLI start is seconds on a loaded 2-core machine; a block needing more is marked skip. */
const blockTimeoutSeconds = 40;

interface Block {
  /** `file:line` of the opening fence. */
  where: string;
  script: string;
  /** Why CI does not run it; undefined: it runs. */
  skip?: string;
  /** A `doc-commands` marker this block cannot use (no reason given, or not a skip). */
  badMarker?: string;
}

/** The shell blocks of one Markdown file, with the marker on the last non-blank line before each fence. */
function shellBlocks(file: string): Block[] {
  const lines = readFileSync(join(packageRoot, file), 'utf8').split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s{0,3})(`{3,}|~{3,})\s*([\w-]*)/.exec(lines[i]!);
    if (!open) continue;
    const [, indent, fence, language] = open;
    let end = i + 1;
    while (end < lines.length && !(lines[end]!.trim().startsWith(fence!) && lines[end]!.trim().replace(/[`~]/g, '') === '')) end++;
    const body = lines.slice(i + 1, end).map((line) => (line.startsWith(indent!) ? line.slice(indent!.length) : line));
    if (shellLanguages.has(language!)) {
      let before = i - 1;
      while (before >= 0 && lines[before]!.trim() === '') before--;
      const note = before >= 0 ? marker.exec(lines[before]!)?.[1] : undefined;
      const reason = note === undefined ? undefined : skipMarker.exec(note)?.[1];
      // A console block shows a session: its commands are the `$ ` lines, the rest is output.
      const commands = language === 'console' ? body.filter((line) => line.startsWith('$ ')).map((line) => line.slice(2)) : body;
      blocks.push({
        where: `${file}:${i + 1}`,
        script: commands.join('\n'),
        ...(reason !== undefined ? { skip: reason } : {}),
        ...(note !== undefined && reason === undefined ? { badMarker: lines[before]!.trim() } : {}),
      });
    }
    i = end;
  }
  return blocks;
}

const docs = [
  'README.md',
  ...readdirSync(join(packageRoot, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];
const blocks = docs.flatMap(shellBlocks);
const run = promisify(execFile);

describe('the README and docs command blocks', () => {
  let scratch: string;
  /** A home whose store exists, empty: what a user has after their first command. Each block gets a copy. */
  let home: string;
  let path: string;

  beforeAll(() => {
    scratch = mkdtempSync(join(tmpdir(), 'a2rl-doc-commands-'));
    // `a2rl` and `npx a2rl` resolve to the built CLI, as in a checkout after `npm run build`.
    const bin = join(scratch, 'bin');
    mkdirSync(bin);
    const cli = join(packageRoot, 'dist', 'src', 'cli', 'main.js');
    const npx = execFileSync('sh', ['-c', 'command -v npx'], { encoding: 'utf8' }).trim();
    writeFileSync(join(bin, 'a2rl'), `#!/bin/sh\nexec "${process.execPath}" "${cli}" "$@"\n`);
    writeFileSync(join(bin, 'npx'), `#!/bin/sh\nif [ "$1" = a2rl ]; then shift; exec a2rl "$@"; fi\nexec "${npx}" "$@"\n`);
    for (const name of ['a2rl', 'npx']) chmodSync(join(bin, name), 0o755);
    path = `${bin}:${process.env.PATH}`;
    home = join(scratch, 'home');
    execFileSync(process.execPath, [cli, '--home', home, '--init', 'runs', 'list'], { stdio: 'pipe' });
  });
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('finds the blocks, and every marker is a skip with its reason', () => {
    expect(blocks.length).toBeGreaterThan(10);
    expect(blocks.filter((block) => block.skip === undefined).length).toBeGreaterThan(0);
    const bad = blocks.filter((block) => block.badMarker !== undefined).map((block) => `${block.where}: ${block.badMarker}`);
    expect(bad, 'write <!-- doc-commands: skip (why CI cannot run it) --> right before the fence').toEqual([]);
  });

  for (const block of blocks) {
    if (block.skip !== undefined) {
      it.skip(`${block.where} (skipped: ${block.skip})`, () => {});
      continue;
    }
    it(`${block.where} runs as written`, async () => {
      // Its own folder (the checkout's files linked in, what it writes stays there), HOME and a2rl home.
      const dir = mkdtempSync(join(scratch, 'block-'));
      const work = join(dir, 'work');
      mkdirSync(work);
      for (const entry of readdirSync(packageRoot)) if (entry !== '.git') symlinkSync(join(packageRoot, entry), join(work, entry));
      mkdirSync(join(dir, 'user'));
      cpSync(home, join(dir, 'a2rl-home'), { recursive: true });
      const env = { ...process.env, PATH: path, HOME: join(dir, 'user'), A2RL_HOME: join(dir, 'a2rl-home') };
      // timeout(1) ends the whole process group, so a command that hangs leaves no server behind.
      const script = `set -eu -o pipefail\n${block.script}\n`;
      const result = await run('timeout', ['-k', '5', String(blockTimeoutSeconds), 'bash', '-c', script], { cwd: work, env }).catch(
        (error: { code?: number; stdout?: string; stderr?: string }) => error,
      );
      const code = 'code' in result ? result.code : 0;
      const said = `${result.stdout ?? ''}${result.stderr ?? ''}`.slice(-2000);
      expect(code, `${block.where} exited ${code}${code === 124 ? ` (over ${blockTimeoutSeconds} s)` : ''}:\n${said}`).toBe(0);
    });
  }
});
