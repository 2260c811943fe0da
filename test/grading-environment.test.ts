import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Grader } from '../src/grading/grader.js';
import { environmentSelection, fullTierRuntimeTarget, standinLibraries } from '../src/tasks/full-task.js';
import type { Task } from '../src/tasks/task.js';
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

function fullTask(runtime: string, shownStandIn: boolean, standins: string[] = ['web_agent_site'], assets?: string): Task {
  return {
    paths: { trainData: assets ? join(assets, 'data') : '/nowhere/data' },
    id: 'webshop',
    tier: 'full',
    graderVersion: '1+abc',
    grader: { kind: 'score' },
    standins,
    libraries: [
      { name: 'hflm', source: '/x/hflm' },
      ...(shownStandIn ? [{ name: 'web_agent_site', source: '/x/hflm/standins/web_agent_site' }] : []),
    ],
    pythonRuntime: { python: '', env: {}, mounts: [{ source: runtime, target: fullTierRuntimeTarget, readOnly: true }] },
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

  it('names the stand-in or the upstream distribution and its version in the grader version, so their grades never mix', () => {
    const runtime = runtimeWithUpstream();
    const onStandIn = grader.version(fullTask(runtime, true));
    const onUpstream = grader.version(fullTask(runtime, false));
    expect(onStandIn).toBe('1+abc/env:web_agent_site=stand-in');
    expect(onUpstream).toBe('1+abc/env:web_agent_site=upstream:webshop@0.4.2');
  });

  it('says so where the upstream package is imported from outside the runtime, and leaves tasks without stand-ins as they were', () => {
    const bare = tempDir('runtime-bare');
    expect(grader.version(fullTask(bare, false))).toBe('1+abc/env:web_agent_site=upstream:unknown');
    expect(grader.version(fullTask(bare, false, []))).toBe('1+abc');
  });

  it('records the data too: the hash of the assets manifest, so grades on other data files never mix', () => {
    const assets = tempDir('assets');
    writeFileSync(join(assets, 'manifest.json'), '{"files":{}}\n');
    const one = grader.version(fullTask(tempDir('runtime-bare'), true, ['web_agent_site'], assets));
    writeFileSync(join(assets, 'manifest.json'), '{"files":{"data/train.jsonl":{}}}\n');
    const other = grader.version(fullTask(tempDir('runtime-bare'), true, ['web_agent_site'], assets));
    expect(one).toMatch(/^1\+abc\/env:web_agent_site=stand-in;data=[0-9a-f]{12}$/);
    expect(other).not.toBe(one);
  });
});

describe('the environment package is chosen explicitly (A2RL_ENV_PACKAGES), never by what is installed', () => {
  it('shows the stand-in by default, ahead of an installed upstream package, and none when upstream is asked for', () => {
    const runtime = runtimeWithUpstream();
    expect(environmentSelection('')).toBe('standin');
    expect(standinLibraries(['web_agent_site'], runtime, '/x/hflm', 'standin')).toEqual([
      { name: 'web_agent_site', source: '/x/hflm/standins/web_agent_site' },
    ]);
    expect(standinLibraries(['web_agent_site'], runtime, '/x/hflm', 'upstream')).toEqual([]);
  });

  it('refuses upstream where the runtime lacks the package, and a selection it does not know, each saying what to do', () => {
    expect(() => standinLibraries(['web_agent_site'], tempDir('runtime-bare'), '/x/hflm', 'upstream')).toThrow(
      /has no web_agent_site package: install upstream's .* or unset A2RL_ENV_PACKAGES/,
    );
    expect(() => environmentSelection('real')).toThrow(/set it to standin or upstream/);
  });
});
