import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Grader } from '../src/grading/grader.js';
import { type EnvironmentSelection, environmentSelection, standinLibraries } from '../src/tasks/full-task.js';
import type { Task } from '../src/tasks/task.js';
import { sha256 } from '../src/util/hashing.js';
import { tempDir } from './helpers/sandbox.js';

/** A runtime folder whose site-packages holds an upstream `web_agent_site`, installed as distribution `webshop` 0.4.2. */
function runtimeWithUpstream(): string {
  const runtime = tempDir('runtime');
  const site = join(runtime, 'lib', 'python3.11', 'site-packages');
  mkdirSync(join(site, 'web_agent_site'), { recursive: true });
  writeFileSync(join(site, 'web_agent_site', '__init__.py'), '');
  const info = join(site, 'webshop-0.4.2.dist-info');
  mkdirSync(info);
  writeFileSync(join(info, 'METADATA'), 'Metadata-Version: 2.1\nName: webshop\nVersion: 0.4.2\n');
  writeFileSync(join(info, 'RECORD'), 'web_agent_site/__init__.py,sha256=x,0\nwebshop-0.4.2.dist-info/METADATA,,\n');
  return runtime;
}

/** A full task with stand-ins as resolveFullTask makes it: the libraries and packages `selection` chose, its assets manifest's hash. */
function fullTask(runtime: string, selection: EnvironmentSelection, standins = ['web_agent_site'], manifest = '{"files":{}}\n'): Task {
  const { libraries, packages } = standinLibraries(standins, runtime, '/x/hflm', selection);
  return {
    id: 'webshop',
    tier: 'full',
    graderVersion: '1+abc',
    grader: { kind: 'score' },
    standins,
    libraries: [{ name: 'hflm', source: '/x/hflm' }, ...libraries],
    environment: { packages, assetsManifest: sha256(manifest) },
  } as unknown as Task;
}

describe('a grade records the environment package it was played in', () => {
  const grader = new Grader(
    undefined as never,
    undefined as never,
    undefined as never,
    { id: 'rubric' } as never,
    '',
    undefined as never,
    1,
  );
  const data = sha256('{"files":{}}\n').slice(0, 12);

  it('names the stand-in or the upstream distribution and its version in the grader version, so their grades never mix', () => {
    const runtime = runtimeWithUpstream();
    expect(grader.version(fullTask(runtime, 'standin'))).toBe(`1+abc/env:web_agent_site=stand-in;data=${data}`);
    expect(grader.version(fullTask(runtime, 'upstream'))).toBe(`1+abc/env:web_agent_site=upstream:webshop@0.4.2;data=${data}`);
  });

  it('says so where the upstream package is a bare folder of no distribution, and leaves tasks without stand-ins as they were', () => {
    const bare = tempDir('runtime-bare');
    mkdirSync(join(bare, 'lib', 'python3.11', 'site-packages', 'web_agent_site'), { recursive: true });
    expect(grader.version(fullTask(bare, 'upstream'))).toBe(`1+abc/env:web_agent_site=upstream:unknown;data=${data}`);
    expect(grader.version(fullTask(bare, 'upstream', []))).toBe('1+abc');
  });

  it('records the data too: the hash of the assets manifest, so grades on other data files never mix', () => {
    const runtime = tempDir('runtime-bare');
    const one = grader.version(fullTask(runtime, 'standin', ['web_agent_site'], '{"files":{}}\n'));
    const other = grader.version(fullTask(runtime, 'standin', ['web_agent_site'], '{"files":{"data/train.jsonl":{}}}\n'));
    expect(one).toMatch(/^1\+abc\/env:web_agent_site=stand-in;data=[0-9a-f]{12}$/);
    expect(other).not.toBe(one);
  });
});

describe('the environment package is chosen explicitly (A2RL_ENV_PACKAGES), never by what is installed', () => {
  it('shows the stand-in by default, ahead of an installed upstream package, and none when upstream is asked for', () => {
    const runtime = runtimeWithUpstream();
    expect(environmentSelection('')).toBe('standin');
    expect(standinLibraries(['web_agent_site'], runtime, '/x/hflm', 'standin').libraries).toEqual([
      { name: 'web_agent_site', source: '/x/hflm/standins/web_agent_site' },
    ]);
    expect(standinLibraries(['web_agent_site'], runtime, '/x/hflm', 'upstream').libraries).toEqual([]);
  });

  it('refuses upstream where the runtime lacks the package, and a selection it does not know, each saying what to do', () => {
    expect(() => standinLibraries(['web_agent_site'], tempDir('runtime-bare'), '/x/hflm', 'upstream')).toThrow(
      /has no web_agent_site package: install upstream's .* or unset A2RL_ENV_PACKAGES/,
    );
    expect(() => environmentSelection('real')).toThrow(/set it to standin or upstream/);
  });
});
