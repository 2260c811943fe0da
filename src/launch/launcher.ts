import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import pLimit from 'p-limit';
import { type BudgetLimits } from '../tasks/budget.js';
import type { Engine } from '../core/engine.js';
import { A2rlError, isA2rlError } from '../util/errors.js';
import { cliEntry } from '../util/paths.js';
import { eventRecorder } from '../store/events.js';
import { summarizeRun, type RunSummary } from '../reports/summary.js';
import { serverVersion } from '../mcp/server.js';
import { getTask } from '../tasks/task.js';
import { issueRunToken } from '../mcp/tokens.js';
import { agentKind, type AgentKind, findExecutable, type McpEndpoint } from './agents.js';
import { runProcessGroup } from './process-group.js';
import { taskPrompt } from './prompt.js';

export interface LaunchOptions {
  /** claude-code, codex, gemini-cli, replay:FILE or command:'…'. */
  agent: string;
  task: string;
  model?: string;
  budget?: string;
  label?: string;
  repeats: number;
  parallel: number;
  transport: 'stdio' | 'http';
  /** Seconds between TERM at the wall-clock deadline and KILL. */
  graceSeconds: number;
  /** `serve` flags that choose the judge and the sandbox backend, so the agent's server grades and runs jobs as the runs were created. */
  serveArgs: string[];
  /** One line per event of the batch (started, ended), for the operator. */
  onLine?: (line: string) => void;
}

export interface LaunchedRun {
  run_id: string;
  agent: string;
  agent_version: string | null;
  driver_model: string | null;
  exit_code: number | null;
  signal: string | null;
  stopped_at_deadline: boolean;
  interrupted: boolean;
  killed: boolean;
  summary: RunSummary;
}

/**
 * `a2rl run`: N independent runs of one agent on one task, K at once. Each run gets a fresh
 * working folder, the task prompt, an MCP configuration naming only this server, and a
 * wall-clock limit enforced on the agent's whole process group.
 */
export async function launchRuns(engine: Engine, options: LaunchOptions): Promise<LaunchedRun[]> {
  const agent = agentKind(options.agent);
  const executable = findExecutable(agent);
  const task = getTask(options.task);
  if (!Number.isInteger(options.repeats) || options.repeats < 1) {
    throw new A2rlError('INVALID_INPUT', '--repeats takes a whole number of runs, at least 1.');
  }
  // On a cluster backend the runs' jobs run on its nodes: this host's cores are no limit.
  const maxParallel = engine.backend.scheduler ? Number.MAX_SAFE_INTEGER : cpus().length;
  if (!Number.isInteger(options.parallel) || options.parallel < 1 || options.parallel > maxParallel) {
    throw new A2rlError(
      'INVALID_INPUT',
      `--parallel takes a whole number from 1 to ${maxParallel} (this host's CPUs; each run's jobs use up to ${task.jobs.cpus}).`,
    );
  }
  const agentVersion = executable ? versionOf(executable, agent) : agent.name === 'replay' ? serverVersion : null;
  const batch = `${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
  const label = options.label ?? [agent.name, options.model].filter(Boolean).join('/');
  const http = options.transport === 'http' ? await startHttpServer(engine.home, options.serveArgs) : undefined;
  try {
    const limit = pLimit(options.parallel);
    return await Promise.all(
      Array.from({ length: options.repeats }, (_, index) =>
        limit(() => launchOne(engine, agent, { ...options, label, batch, repeat: index + 1, agentVersion, httpUrl: http?.url })),
      ),
    );
  } finally {
    await http?.stop();
    await engine.grader.drain();
  }
}

interface OneLaunch extends LaunchOptions {
  label: string;
  batch: string;
  repeat: number;
  agentVersion: string | null;
  httpUrl?: string;
}

async function launchOne(engine: Engine, agent: AgentKind, launch: OneLaunch): Promise<LaunchedRun> {
  const row = engine.prepareRun({ taskId: launch.task, budget: launch.budget, label: launch.label });
  const record = eventRecorder(engine.store, row.id, row.created_at);
  const limits = JSON.parse(row.budget) as BudgetLimits;
  let endpoint: McpEndpoint;
  if (launch.httpUrl) {
    endpoint = { kind: 'http', url: launch.httpUrl, token: issueRunToken(engine.store, row.id) };
    engine.releaseRun(row.id);
  } else {
    // The launcher holds the run until the agent's server, started by the agent, takes it over.
    endpoint = {
      kind: 'stdio',
      command: process.execPath,
      args: [cliEntry, '--home', engine.home, 'serve', '--run', row.id, ...launch.serveArgs],
    };
  }
  const agentDir = join(row.dir, 'agent');
  const workDir = join(agentDir, 'work');
  mkdirSync(workDir, { recursive: true });
  const prompt = taskPrompt(getTask(launch.task), limits, engine.grader.judge.id);
  writeFileSync(join(agentDir, 'prompt.md'), prompt);
  const invocation = agent.invocation({ endpoint, prompt, model: launch.model, agentDir });
  for (const file of invocation.files) writeFileSync(file.path, file.content, { mode: 0o600 });
  const transcript = join(agentDir, 'transcript.jsonl');
  const stderrLog = join(agentDir, 'stderr.log');
  const deadline = row.created_at + limits.wallSeconds * 1000;
  // The run's columns are what reports and the leaderboard group by; the event keeps the whole launch.
  engine.store.setRunAgent(row.id, { agent: agent.name, agent_version: launch.agentVersion ?? undefined, driver_model: launch.model });
  record('agent', 'launched', {
    agent: agent.name,
    agent_version: launch.agentVersion,
    driver_model: launch.model ?? null,
    batch: launch.batch,
    repeat: launch.repeat,
    repeats: launch.repeats,
    transport: endpoint.kind,
    command: invocation.command,
    args: invocation.args,
    env: Object.keys(invocation.env),
    cwd: workDir,
    config_files: invocation.files.map((file) => file.path),
    prompt: join(agentDir, 'prompt.md'),
    transcript,
    transcript_format: agent.transcript,
    stderr: stderrLog,
    deadline,
    grace_seconds: launch.graceSeconds,
  });
  launch.onLine?.(`run ${row.id} [${launch.repeat}/${launch.repeats}]: ${agent.name} started (transcript: ${transcript})`);
  let outcome;
  try {
    outcome = await runProcessGroup({
      command: invocation.command,
      args: invocation.args,
      cwd: workDir,
      env: { ...process.env, ...invocation.env, A2RL_RUN_ID: row.id },
      stdoutPath: transcript,
      stderrPath: stderrLog,
      deadline,
      graceMs: launch.graceSeconds * 1000,
    });
  } catch (error) {
    record('agent', 'failed', { error: (error as Error).message });
    await endLeftRun(engine, row.id, `the agent could not start: ${(error as Error).message}`);
    throw error;
  }
  record('agent', 'exited', {
    exit_code: outcome.exitCode,
    signal: outcome.signal,
    stopped_at_deadline: outcome.stoppedAtDeadline,
    interrupted: outcome.interrupted,
    killed: outcome.killed,
    duration_ms: outcome.endedAt - outcome.startedAt,
  });
  const killed = outcome.killed ? ' (killed after the grace)' : '';
  const how = outcome.stoppedAtDeadline
    ? `stopped at the wall-clock deadline${killed}`
    : outcome.interrupted
      ? `stopped by the operator${killed}`
      : `exited with ${outcome.signal ?? `code ${outcome.exitCode}`}`;
  await endLeftRun(engine, row.id, `the agent ${how}`);
  await gradingDone(engine, row.id);
  const summary = summarizeRun(engine.store, row.id);
  launch.onLine?.(
    `run ${row.id} [${launch.repeat}/${launch.repeats}]: ${agent.name} ${how}; best ${summary.best ? `${summary.best.public} public / ${summary.best.private} private` : 'none'}`,
  );
  return {
    run_id: row.id,
    agent: agent.name,
    agent_version: launch.agentVersion,
    driver_model: launch.model ?? null,
    exit_code: outcome.exitCode,
    signal: outcome.signal,
    stopped_at_deadline: outcome.stoppedAtDeadline,
    interrupted: outcome.interrupted,
    killed: outcome.killed,
    summary,
  };
}

/**
 * When the agent is gone the run is over. An HTTP run is revoked: its server stops its jobs
 * and finishes its grading. A stdio run's server is gone with the agent's process group
 * (clients stop their servers when they exit, grading or not): what it left is settled here.
 * A server the agent started outside its process group gets two minutes to finish first.
 */
async function endLeftRun(engine: Engine, runId: string, reason: string): Promise<void> {
  if (engine.isRemote(runId)) {
    if (engine.store.revokeRun(runId, reason, Date.now())) {
      eventRecorder(engine.store, runId, engine.store.getRun(runId)!.created_at)('run', 'ended', { reason });
    }
    return;
  }
  for (let waited = 0; ; waited++) {
    try {
      await engine.settleAbandonedRun(runId, reason);
      return;
    } catch (error) {
      if (!isA2rlError(error, 'CONFLICT') || waited >= 120) throw error;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

/** Waits until the run's submissions are graded, here or by the server that serves the run. */
async function gradingDone(engine: Engine, runId: string): Promise<void> {
  await engine.grader.drain();
  while (engine.store.listUnfinishedSubmissions().some((submission) => submission.run_id === runId)) {
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

function versionOf(executable: string, agent: AgentKind): string | null {
  try {
    const output = execFileSync(executable, agent.versionArgs ?? ['--version'], { encoding: 'utf8', timeout: 30_000 });
    return output.trim().split('\n')[0] || null;
  } catch {
    return null;
  }
}

/** A `serve --http` child on a free loopback port, on the launcher's home, for agents that connect over HTTP. */
async function startHttpServer(home: string, serveArgs: string[]): Promise<{ url: string; stop: () => Promise<void> }> {
  const child: ChildProcess = spawn(process.execPath, [cliEntry, '--home', home, 'serve', '--http', '--port', '0', ...serveArgs], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    let stderr = '';
    let listening = false;
    const timer = setTimeout(() => reject(new A2rlError('UNAVAILABLE', `serve --http did not start within 30 s: ${stderr}`)), 30_000);
    // Its log also goes to $A2RL_HOME/server.log; here only the line that names its address matters.
    child.stderr!.on('data', (chunk: Buffer) => {
      if (listening) return;
      stderr += chunk;
      const match = /listening on (http:\/\/\S+)/.exec(stderr);
      if (match) {
        listening = true;
        clearTimeout(timer);
        resolve(`${match[1]}/mcp`);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new A2rlError('UNAVAILABLE', `serve --http exited (code ${code}) before listening: ${stderr}`));
    });
  });
  return {
    url,
    stop: async () => {
      // SIGTERM: the server stops accepting, stops the runs' jobs, lets grading in flight finish and exits.
      child.kill('SIGTERM');
      await exited;
    },
  };
}
