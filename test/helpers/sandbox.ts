import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BubblewrapBackend } from '../../sandbox/bwrap.js';
import { processStartTime } from '../../sandbox/process-tree.js';
import type { ExitStatus, SandboxBackend, SandboxInstance, SandboxProcess, SandboxSpec } from '../../sandbox/contract.js';

/**
 * Names this test process as a server would (pid-starttime) on the cgroups and containers
 * its sandboxes create: a server starting meanwhile sweeps only what dead owners left, and
 * sees this one alive.
 */
export const liveOwner = `${process.pid}-${processStartTime(process.pid)}`;

export const defaultLimits = { cpus: 1, memoryBytes: 512 * 2 ** 20, pids: 64, gpus: [] as number[] };

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `a2rl-${prefix}-`));
}

/** A sandbox over a fresh workspace, as a run gets it (bubblewrap unless another backend is given). */
export async function makeSandbox(
  extra: Partial<SandboxSpec> = {},
  backend: SandboxBackend = new BubblewrapBackend(liveOwner),
): Promise<{ sandbox: SandboxInstance; workspace: string }> {
  const workspace = tempDir('ws');
  const sandbox = await backend.create({
    name: 'test',
    mounts: [{ source: workspace, target: '/workspace', readOnly: false }, ...(extra.mounts ?? [])],
    hidden: extra.hidden ?? [],
    env: extra.env ?? {},
    workdir: '/workspace',
    limits: extra.limits,
  });
  return { sandbox, workspace };
}

/** Runs a shell command in the sandbox; returns its exit and everything it printed. */
export async function run(
  sandbox: SandboxInstance,
  script: string,
  limits = defaultLimits,
  onStart?: (process: SandboxProcess) => void,
): Promise<ExitStatus & { output: string; cpuSeconds: number; measured: boolean }> {
  const chunks: Buffer[] = [];
  const process = sandbox.exec({
    command: ['/bin/sh', '-c', script],
    limits,
    output: { write: (chunk) => chunks.push(chunk) },
    tag: `t${Math.random().toString(36).slice(2, 8)}`,
  });
  onStart?.(process);
  const status = await process.exited;
  const usage = process.usage();
  return { ...status, output: Buffer.concat(chunks).toString('utf8'), cpuSeconds: usage.cpuSeconds, measured: usage.measured };
}
