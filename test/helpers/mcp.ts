import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Progress } from '@modelcontextprotocol/sdk/types.js';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { processStartTime } from '../../sandbox/process-tree.js';
import { unmountStaleWorkspaces } from '../../sandbox/run-storage.js';
import { ownerAlive } from '../../sandbox/process-tree.js';
import { checkInProgress } from '../../src/integrity/background.js';
import { connectStdio } from '../../src/launch/client.js';
import { Store } from '../../src/store/store.js';
import { cliEntry } from '../../src/util/paths.js';

export interface CallResult {
  isError: boolean;
  text: string;
  structured: Record<string, any>;
}

/**
 * Tests call as fast as the machine allows: how many a second must not decide whether a call is
 * refused, so test servers lift the per-run call rate; a test of the limit passes its own after it.
 */
export const unlimitedCalls = ['--calls-per-second', '1000000'];

/** A real `a2rl serve` child process with an MCP client on its stdio. */
export async function startServer(options: {
  home: string;
  task?: string;
  budget?: string;
  label?: string;
  serverArgs?: string[];
}): Promise<Client> {
  const { client } = await connectStdio({
    task: options.task ?? 'micro-gsm8k',
    budget: options.budget,
    label: options.label ?? 'test',
    serverArgs: [...unlimitedCalls, ...(options.serverArgs ?? [])],
    home: options.home,
    stderr: 'ignore',
    clientName: 'a2rl-test',
  });
  // The SDK kills a server that has not exited 2 s after the client leaves: what it had mounted is taken down then.
  const close = client.close.bind(client);
  const pid = (client.transport as StdioClientTransport).pid;
  client.close = async () => {
    await close();
    // A SIGKILL is sent, not waited for.
    for (const deadline = Date.now() + 5000; pid && processStartTime(pid) !== undefined && Date.now() < deadline;) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    // A run's check outlives its server and reads the workspace: it unmounts it when done.
    await unmountStaleWorkspaces(options.home, (runId) => {
      const run = withStoreOf(options.home, (store) => store.getRun(runId));
      return run !== undefined && (ownerAlive(run.owner) || checkInProgress(run.dir));
    });
  };
  return client;
}

function withStoreOf<T>(home: string, look: (store: Store) => T): T {
  const store = new Store(join(home, 'store.sqlite'));
  try {
    return look(store);
  } finally {
    store.close();
  }
}

export async function call(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
  onprogress?: (p: Progress) => void,
): Promise<CallResult> {
  const result = await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000, onprogress });
  const content = (result.content ?? []) as Array<{ type: string; text?: string }>;
  return {
    isError: result.isError === true,
    text: content.find((c) => c.type === 'text')?.text ?? '',
    structured: (result.structuredContent ?? {}) as Record<string, any>,
  };
}

/** Waits for a job to end through job_status, as an agent would. */
export async function waitJob(client: Client, jobId: string, seconds = 600): Promise<Record<string, any>> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const status = await call(client, 'job_status', { job_id: jobId, wait_seconds: 20 });
    const job = status.structured.jobs[0];
    if (job.state !== 'running') return job;
    if (Date.now() > deadline) throw new Error(`${jobId} still running after ${seconds}s`);
  }
}

export async function waitScore(client: Client, submissionId: string, seconds = 600): Promise<Record<string, any>> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const score = await call(client, 'get_score', { submission_id: submissionId, wait_seconds: 20 });
    const submission = score.structured.submissions[0];
    if (submission.state === 'graded' || submission.state === 'failed') return score.structured;
    if (Date.now() > deadline) throw new Error(`${submissionId} still ${submission.state} after ${seconds}s`);
  }
}

/**
 * Polls get_score until the run's baseline grading is no longer pending, as an agent would (get_score waits on
 * submissions only); returns the baseline (`state`, `score` or `error`), a failed one at once.
 */
export async function settledBaseline(client: Client, seconds = 600): Promise<Record<string, any>> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const { baseline } = (await call(client, 'get_score')).structured;
    if (baseline.state !== 'pending') return baseline;
    if (Date.now() > deadline) throw new Error(`the baseline is still pending after ${seconds}s`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** `a2rl serve` spoken to in raw JSON-RPC lines, for what a client library would hide (stdout, crashes). */
export function rawServer(home: string, serverArgs: string[] = []) {
  const child = spawn(process.execPath, [cliEntry, 'serve', '--task', 'micro-gsm8k', ...serverArgs], {
    env: { ...process.env, A2RL_HOME: home },
  });
  let stdout = '';
  let stderr = '';
  const waiting = new Map<number, (message: any) => void>();
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk;
    for (const line of chunk.toString().split('\n').filter(Boolean)) {
      const message = JSON.parse(line);
      if (message.id !== undefined) waiting.get(message.id)?.(message);
    }
  });
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk));
  let nextId = 1;
  const send = (message: object) => child.stdin.write(`${JSON.stringify(message)}\n`);
  const request = (method: string, params: object) =>
    new Promise<any>((resolve) => {
      const id = nextId++;
      waiting.set(id, resolve);
      send({ jsonrpc: '2.0', id, method, params });
    });
  return {
    child,
    output: () => ({ stdout, stderr }),
    request,
    async initialize() {
      await request('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } });
      send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    },
    exited: new Promise<number | null>((resolve) => child.once('exit', resolve)),
  };
}

/** Perturbs the base model and saves it: a real, loadable checkpoint of new content (deterministic in `scale`). */
export const tweakScript = (out: string, scale: number) =>
  `python3 -c "
import torch
from microlm import checkpoint
m = checkpoint.load('models/base')
with torch.no_grad():
    for p in m.parameters(): p.mul_(${scale})
checkpoint.save(m, '${out}')
"`;
