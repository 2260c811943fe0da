import fc from 'fast-check';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { isA2rlError } from '../src/util/errors.js';
import { maxWriteBytes, normalise, Workspace } from '../src/core/workspace.js';
import { tempDir } from './helpers/sandbox.js';

function snapshot(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string, prefix: string) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const path = `${prefix}${entry.name}`;
      out.push(entry.isFile() ? `${path}:${readFileSync(join(d, entry.name), 'utf8')}` : path);
      if (entry.isDirectory()) walk(join(d, entry.name), `${path}/`);
    }
  };
  walk(dir, '');
  return out.sort();
}

describe('workspace paths', () => {
  let root: string;
  let data: string;
  let outside: string;
  let workspace: Workspace;

  beforeEach(() => {
    const base = tempDir('wsroot');
    root = join(base, 'workspace');
    data = join(base, 'data');
    outside = join(base, 'outside');
    mkdirSync(data);
    mkdirSync(outside);
    writeFileSync(join(data, 'train.jsonl'), '{"q": 1}\n');
    writeFileSync(join(outside, 'secret.txt'), 'secret');
    workspace = new Workspace(root, [{ path: 'data', source: data }]);
    workspace.prepare(['code', 'output']);
  });

  it('accepts relative and /workspace/ paths and maps read-only mounts', () => {
    expect(workspace.resolve('code/train.py', 'write').path).toBe('code/train.py');
    expect(workspace.resolve('/workspace/code/./train.py', 'write').path).toBe('code/train.py');
    expect(workspace.readText('data/train.jsonl', 0, 100).content).toBe('{"q": 1}\n');
    expect(workspace.list('.', 2, 100).entries.find((e) => e.path === 'data/train.jsonl')?.read_only).toBe(true);
  });

  it.each([
    ['../outside/secret.txt', 'OUTSIDE_WORKSPACE'],
    ['code/../../outside/secret.txt', 'OUTSIDE_WORKSPACE'],
    ['/etc/passwd', 'OUTSIDE_WORKSPACE'],
    ['~/.ssh/id_rsa', 'OUTSIDE_WORKSPACE'],
    ['code/a\0b', 'INVALID_INPUT'],
  ])('refuses %j', (path, code) => {
    const before = snapshot(root);
    for (const access of ['read', 'write'] as const) {
      try {
        workspace.resolve(path, access);
        expect.unreachable();
      } catch (error) {
        expect(isA2rlError(error, code as never)).toBe(true);
        expect((error as Error).message).toMatch(/workspace|relative|path/i);
      }
    }
    expect(snapshot(root)).toEqual(before);
  });

  it('refuses symlinks that lead outside, for reading and writing', () => {
    symlinkSync(join(outside, 'secret.txt'), join(root, 'code', 'link.txt'));
    symlinkSync(outside, join(root, 'code', 'dirlink'));
    symlinkSync('/nonexistent/file', join(root, 'code', 'dangling'));
    expect(() => workspace.readText('code/link.txt', 0, 100)).toThrow(/outside the workspace/);
    expect(() => workspace.readText('code/dirlink/secret.txt', 0, 100)).toThrow(/outside the workspace/);
    expect(() => workspace.writeText('code/dirlink/new.txt', 'x', false)).toThrow(/outside the workspace/);
    expect(() => workspace.writeText('code/dangling', 'x', false)).toThrow(/symlink/);
    expect(readdirSync(outside)).toEqual(['secret.txt']);
    expect(readFileSync(join(outside, 'secret.txt'), 'utf8')).toBe('secret');
    // Listing shows the links without following them.
    expect(workspace.list('code', 1, 100).entries.map((e) => e.type)).toEqual(['symlink', 'symlink', 'symlink']);
  });

  it('never blocks on a FIFO the agent left in place of a file', () => {
    execFileSync('mkfifo', [join(root, 'code', 'pipe')]);
    expect(() => workspace.readText('code/pipe', 0, 100)).toThrow(/not a regular file/);
    expect(() => workspace.writeText('code/pipe', 'x', false)).toThrow(/cannot be opened|not a regular file/);
  });

  it('refuses writes to read-only parts, oversized writes and binary reads, changing nothing', () => {
    const before = snapshot(root);
    expect(() => workspace.writeText('data/train.jsonl', 'x', false)).toThrow(/read-only.*code\//s);
    expect(() => workspace.writeText('code/big.txt', 'x'.repeat(maxWriteBytes + 1), false)).toThrow(/at most/);
    expect(() => workspace.writeText('.', 'x', false)).toThrow(/file path/);
    expect(snapshot(root)).toEqual(before);
    expect(readFileSync(join(data, 'train.jsonl'), 'utf8')).toBe('{"q": 1}\n');
    writeFileSync(join(root, 'output', 'model.pt'), Buffer.from([1, 0, 2]));
    expect(() => workspace.readText('output/model.pt', 0, 100)).toThrow(/binary file.*exec/s);
  });

  it('refuses paths under a read-only file and paths nested past its depth, with what to do', () => {
    const file = join(tempDir('wsfile'), 'instructions.md');
    writeFileSync(file, '# brief\n');
    const withFile = new Workspace(root, [{ path: 'instructions.md', source: file }]);
    expect(withFile.readText('instructions.md', 0, 100).content).toBe('# brief\n');
    for (const read of [() => withFile.readText('instructions.md/x', 0, 100), () => withFile.list('instructions.md/x', 1, 10)]) {
      expect(read).toThrow(/is a file, not a folder/);
    }
    expect(() => workspace.writeText(`output/${'a/'.repeat(70)}f.txt`, 'x', false)).toThrow(/at most 64 deep/);
  });

  it("tells a workspace never served (its prepared folders, empty) from one holding an agent's files, following no link", () => {
    expect(workspace.holdsOnlyPrepared(['code', 'output'])).toBe(true);
    expect(new Workspace(join(root, 'absent'), []).holdsOnlyPrepared(['code'])).toBe(true);
    writeFileSync(join(root, 'code', 'train.py'), '');
    expect(workspace.holdsOnlyPrepared(['code', 'output'])).toBe(false);
    const linked = new Workspace(tempDir('wslinked'), [{ path: 'data', source: data }]);
    linked.prepare(['code']);
    // A link to an empty folder: empty if followed, yet the agent's.
    symlinkSync(tempDir('wsempty'), join(linked.root, 'output'));
    expect(linked.holdsOnlyPrepared(['code', 'output'])).toBe(false);
  });

  it('never resolves to a host path outside its bases, whatever the input', () => {
    const segment = fc.constantFrom('..', '.', 'code', 'data', 'x', '', '/workspace', 'a..b');
    fc.assert(
      fc.property(fc.array(segment, { maxLength: 8 }), fc.boolean(), (segments, absolute) => {
        const input = (absolute ? '/' : '') + segments.join('/');
        try {
          const resolved = workspace.resolve(input, 'read');
          expect([root, data]).toContain(resolved.base);
          expect(resolved.names.every((name) => name !== '' && name !== '.' && name !== '..' && !name.includes('/'))).toBe(true);
          expect(normalise(input)).not.toMatch(/^\.\.(\/|$)/);
        } catch (error) {
          expect(isA2rlError(error)).toBe(true);
        }
      }),
    );
  });
});
