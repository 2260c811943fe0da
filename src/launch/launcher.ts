import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, closeSync, existsSync, fstatSync, mkdirSync, openSync, readSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import pLimit from 'p-limit';
import { type BudgetLimits } from '../tasks/budget.js';
import type { Engine } from '../core/engine.js';
import { A2rlError, isA2rlError } from '../util/errors.js';
import { readTail } from '../util/safe-fs.js';
import { cliEntry } from '../util/paths.js';
import { eventRecorder } from '../store/events.js';
import { summarizeRun, type RunSummary } from '../reports/summary.js';
import { serverVersion } from '../mcp/server.js';
import { issueRunToken } from '../mcp/tokens.js';
import { ownerAlive } from '../../sandbox/process-tree.js';
import { ownerOf } from '../core/ownership.js';
import {
  agentKind,
  type AgentKind,
  findExecutable,
  type McpEndpoint,
  mcpStartTimeout,
  type ModelActivity,
  type ToldModel,
} from './agents.js';
import { agentEnvironment, serverEnvironment } from './environment.js';
import { relayEntry, startStdioBridge, type StdioBridge } from './bridge.js';
import { agentIdentity, agentInstallRoot, assertJailable, giveJail, type JailSpec, jailCommand, jailSocketPath } from './jail.js';
import { jailNetworkPlan, startJailNetwork } from './jail-network.js';
import { type GroupOutcome, runProcessGroup } from './process-group.js';
import { taskPrompt } from './prompt.js';
import { fileLines } from '../transcripts/json-lines.js';

export interface LaunchOptions {
  /** claude-code, codex, gemini-cli, opencode, qwen-code, replay:FILE or command:'…'. */
  agent: string;
  task: string;
  /** A full-tier task's base model, a Hugging Face id (default: the task's). */
  baseModel?: string;
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
  /** The operator's own arguments for the agent CLI (a model provider, an effort level), recorded with the run. */
  agentArgs?: string[];
  /** Host folders or files the agent needs read-only in its jail beside its installation (a command agent's own code). */
  agentBinds?: string[];
  /** Variables of the launcher's environment the agent gets beside those of its kind (`NAME` or `PREFIX_*`; never `A2RL_*`). */
  agentEnv?: string[];
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
  /** Why the run does not count (the agent never had the tools, its model never answered, or it did not exit normally); null for a benchmark run. */
  infrastructure_failure: string | null;
  /** The run this one retried after its infrastructure failed; null for a first attempt. */
  retry_of: string | null;
  summary: RunSummary;
}

/**
 * This process's start, read once as the launcher's module loads: what a stdio server's start (the same modules) takes
 * on this host. Never read later: a process that launches for hours (`a2rl suite run`) or asked an agent its version
 * first (up to minutes) started no slower.
 */
const ownStartMs = process.uptime() * 1000;
/** The longest an agent waits for its MCP server to start, however slow the measured start. */
const maxMcpStartTimeoutMs = 10 * 60_000;

/**
 * `a2rl run`: N independent runs of one agent on one task, K at once. Each run gets a fresh
 * working folder, the task prompt, an MCP configuration naming only this server, and a
 * wall-clock limit enforced on the agent's whole process group.
 */
export async function launchRuns(engine: Engine, options: LaunchOptions): Promise<LaunchedRun[]> {
  const agent = agentKind(options.agent);
  const modelArgument = agent.modelArgument?.(options.agentArgs ?? []);
  if (modelArgument) {
    throw new A2rlError(
      'INVALID_INPUT',
      `--agent-arg ${modelArgument} names ${agent.name}'s model, which the run would not record: give the model with --model.`,
    );
  }
  const executable = findExecutable(agent);
  const agentPaths = jailedAgentPaths(executable, options.agentBinds ?? [], engine.home);
  const environment = agentEnvironment(agent.environment, options.agentEnv ?? []);
  const task = await engine.taskFor({ taskId: options.task, baseModel: options.baseModel });
  if (!Number.isInteger(options.repeats) || options.repeats < 1) {
    throw new A2rlError('INVALID_INPUT', '--repeats takes a whole number of runs, at least 1.');
  }
  if (options.parallel > 1 && options.transport === 'stdio' && options.serveArgs.includes('--gpus')) {
    throw new A2rlError(
      'INVALID_INPUT',
      "--gpus with --parallel over stdio would give each run's own server the same GPUs; add --transport http, where one server shares them.",
    );
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
  const told = executable ? agent.toldModel?.(executable, options.model) : undefined;
  // How long an a2rl process takes to start on this host (this one's, to loading the launcher; over HTTP, its server's): what the agent waits for its server.
  let serverStartMs = ownStartMs;
  const batch = `${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
  const label = options.label ?? [agent.name, options.model].filter(Boolean).join('/');
  const http = options.transport === 'http' ? await startHttpServer(engine.home, options.serveArgs) : undefined;
  if (http) serverStartMs = http.startMs;
  try {
    const limit = pLimit(options.parallel);
    const launched = await Promise.all(
      Array.from({ length: options.repeats }, (_, index) =>
        limit(() =>
          launchWithRetry(engine, agent, {
            ...options,
            label,
            batch,
            repeat: index + 1,
            agentVersion,
            mcpStartTimeoutMs: Math.min(mcpStartTimeout(serverStartMs), maxMcpStartTimeoutMs),
            http: http && { url: http.url, owner: http.owner },
            executable,
            told,
            agentPaths,
            environment,
          }),
        ),
      ),
    );
    return launched.flat();
  } finally {
    await http?.stop();
    await engine.grader.drain();
  }
}

/**
 * What the agent's jail shows of the host beyond the system and the run's own folders: its
 * installation and the operator's --agent-bind paths; refused when one lies in or holds what agents never see.
 */
export function jailedAgentPaths(executable: string | undefined, agentBinds: string[], home: string): string[] {
  const paths = [...(executable ? [agentInstallRoot(executable)] : []), ...agentBinds.map((path) => resolve(path))];
  for (const path of paths) assertJailable(path, home);
  return paths;
}

interface OneLaunch extends LaunchOptions {
  label: string;
  batch: string;
  repeat: number;
  agentVersion: string | null;
  /** How long the agent waits for its MCP server (`mcpStartTimeout`). */
  mcpStartTimeoutMs: number;
  /** The launcher's own `serve --http`: its address, and its owner name, to which each run is handed. */
  http?: { url: string; owner: string };
  /** The agent's executable as found on PATH (or in the setup's agents folder). */
  executable: string | undefined;
  /** The model the agent is told, resolved once for the launch (`AgentKind.toldModel`). */
  told: ToldModel | undefined;
  /** Host paths shown read-only in the jail: the agent's installation and the operator's --agent-bind. */
  agentPaths: string[];
  /** What the agent gets of the launcher's environment (an allow-list). */
  environment: Record<string, string>;
}

/** One repeat: a run whose infrastructure failed is retried once, in a new run; both are returned. */
async function launchWithRetry(engine: Engine, agent: AgentKind, launch: OneLaunch): Promise<LaunchedRun[]> {
  const first = await launchOne(engine, agent, launch, null);
  if (first.infrastructure_failure === null || first.interrupted) return [first];
  launch.onLine?.(
    `run ${first.run_id} [${launch.repeat}/${launch.repeats}]: infrastructure failure (${first.infrastructure_failure}); retrying once`,
  );
  return [first, await launchOne(engine, agent, launch, first.run_id)];
}

async function launchOne(engine: Engine, agent: AgentKind, launch: OneLaunch, retryOf: string | null): Promise<LaunchedRun> {
  const row = await engine.prepareRun({ taskId: launch.task, budget: launch.budget, label: launch.label, baseModel: launch.baseModel });
  const record = eventRecorder(engine.store, row.id, row.created_at);
  const limits = JSON.parse(row.budget) as BudgetLimits;
  const agentDir = join(row.dir, 'agent');
  const workDir = join(agentDir, 'work');
  const homeDir = join(agentDir, 'home');
  mkdirSync(workDir, { recursive: true });
  mkdirSync(homeDir, { recursive: true });
  const transcript = join(agentDir, 'transcript.jsonl');
  const stderrLog = join(agentDir, 'stderr.log');
  let endpoint: McpEndpoint;
  let bridge: StdioBridge | undefined;
  if (launch.http) {
    endpoint = { kind: 'http', url: launch.http.url, token: issueRunToken(engine.store, row.id) };
    // To this launcher's server by name: another HTTP server on the same home adopts ownerless runs, and would take it.
    engine.releaseRun(row.id, launch.http.owner);
  } else {
    // The jailed agent starts the relay; behind the bridge socket the launcher starts the real
    // server outside the jail, which takes the run over from the launcher.
    bridge = await startStdioBridge({
      command: process.execPath,
      args: [cliEntry, '--home', engine.home, 'serve', '--run', row.id, ...launch.serveArgs],
      env: serverEnvironment(),
      stderrPath: join(agentDir, 'server-stderr.log'),
    });
    endpoint = { kind: 'stdio', command: process.execPath, args: [relayEntry, jailSocketPath] };
  }
  const prompt = taskPrompt(await engine.taskFor({ taskId: launch.task, baseModel: launch.baseModel }), limits, engine.grader.judge.id);
  writeFileSync(join(agentDir, 'prompt.md'), prompt);
  const invocation = agent.invocation({
    endpoint,
    prompt,
    model: launch.model,
    agentDir,
    homeDir,
    extraArgs: launch.agentArgs ?? [],
    mcpStartTimeoutMs: launch.mcpStartTimeoutMs,
    told: launch.told,
  });
  // The operator's model, or the one the launcher told the agent when they named none (Codex's default, named explicitly).
  const driverModel = launch.model ?? launch.told?.model;
  for (const file of invocation.files) {
    mkdirSync(dirname(file.path), { recursive: true });
    writeFileSync(file.path, file.content, { mode: 0o600 });
  }
  // The jail's network: the endpoints named by the URLs the agent was given (not its prompt's), and its provider's API.
  const urls = [...Object.values(launch.environment), ...(launch.agentArgs ?? []), ...(endpoint.kind === 'http' ? [endpoint.url] : [])];
  const reachable = jailNetworkPlan(urls, agent.apiHosts ?? []);
  const network = await startJailNetwork(reachable, launch.environment);
  const configFiles = invocation.files.filter((file) => !file.path.startsWith(`${homeDir}/`)).map((file) => file.path);
  const jailSpec: JailSpec = {
    command: launch.executable ?? invocation.command,
    args: invocation.args,
    workDir,
    homeDir,
    readOnly: [
      ...launch.agentPaths,
      ...(invocation.readOnly ?? []),
      ...configFiles,
      join(agentDir, 'prompt.md'),
      ...(bridge ? [relayEntry] : []),
    ],
    socket: bridge?.socket,
    network,
    identity: agentIdentity(row.id),
  };
  if (jailSpec.identity) giveJail({ ...jailSpec, identity: jailSpec.identity }, configFiles);
  const jail = jailCommand(jailSpec);
  const deadline = row.created_at + limits.wallSeconds * 1000;
  const env = { ...launch.environment, ...invocation.env, ...network.env, A2RL_RUN_ID: row.id };
  // The run's columns are what reports and the leaderboard group by; the event keeps the whole launch.
  engine.store.setRunAgent(row.id, { agent: agent.name, agent_version: launch.agentVersion ?? undefined, driver_model: driverModel });
  engine.store.setRunBatch(row.id, launch.batch);
  record('agent', 'launched', {
    agent: agent.name,
    agent_version: launch.agentVersion,
    driver_model: driverModel ?? null,
    batch: launch.batch,
    repeat: launch.repeat,
    repeats: launch.repeats,
    transport: endpoint.kind,
    // The agent's wait for its server, from the server start measured on this host (`mcpStartTimeout`).
    mcp_start_timeout_ms: launch.mcpStartTimeoutMs,
    command: invocation.command,
    args: invocation.args,
    jail: jail.args.slice(0, jail.args.indexOf('--')),
    // What the jail lets the agent reach (host:port; URLs could carry credentials).
    network: reachable.allowed.map((endpoint) => `${endpoint.host}:${endpoint.port}`),
    // Names only: the values are the agent's keys and its run token.
    env: Object.keys(env).sort(),
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
  let outcome: GroupOutcome;
  try {
    outcome = await runProcessGroup({
      command: jail.command,
      args: jail.args,
      cwd: workDir,
      env,
      stdoutPath: transcript,
      stderrPath: stderrLog,
      deadline,
      graceMs: launch.graceSeconds * 1000,
      beforeDeadlineStop: () => serverEndedRun(engine, row.id),
      // The server behind the bridge runs outside the agent's group: the operator's signal goes to it too.
      onInterrupt: (signal) => void bridge?.close(signal),
    });
  } catch (error) {
    const reason = `the agent could not start: ${(error as Error).message}`;
    record('agent', 'failed', { error: (error as Error).message });
    await bridge?.close('SIGTERM');
    await network.close();
    engine.store.markInfrastructureFailure(row.id, reason);
    record('run', 'infrastructure_failure', { reason });
    await endLeftRun(engine, row.id, reason);
    return {
      run_id: row.id,
      agent: agent.name,
      agent_version: launch.agentVersion,
      driver_model: driverModel ?? null,
      exit_code: null,
      signal: null,
      stopped_at_deadline: false,
      interrupted: false,
      killed: false,
      infrastructure_failure: reason,
      retry_of: retryOf,
      summary: summarizeRun(engine.store, row.id),
    };
  }
  // The agent is gone; its server (outside the jail) ends the run and finishes grading.
  await bridge?.close();
  await network.close();
  record('agent', 'exited', {
    exit_code: outcome.exitCode,
    signal: outcome.signal,
    stopped_at_deadline: outcome.stoppedAtDeadline,
    interrupted: outcome.interrupted,
    killed: outcome.killed,
    duration_ms: outcome.endedAt - outcome.startedAt,
  });
  const trailer = agent.transcriptTrailer?.(homeDir);
  // On a line of its own: an agent killed mid-event left its last line unfinished.
  if (trailer) appendFileSync(transcript, (/[^\n]$/.test(readTail(transcript, 1).text) ? '\n' : '') + trailer);
  const killed = outcome.killed ? ' (killed after the grace)' : '';
  const how = outcome.stoppedAtDeadline
    ? `stopped at the wall-clock deadline${killed}`
    : outcome.interrupted
      ? `stopped by the operator${killed}`
      : `exited with ${outcome.signal ?? `code ${outcome.exitCode}`}`;
  // A deadline stop ends the run for the same reason on both transports, whichever of the server and the launcher ends it.
  await endLeftRun(engine, row.id, outcome.stoppedAtDeadline ? wallClockEndReason : `the agent ${how}`);
  const failure = infrastructureFailure(engine, row.id, outcome, how, () => modelActivityOf(agent, transcript, stderrLog));
  if (failure) {
    engine.store.markInfrastructureFailure(row.id, failure);
    record('run', 'infrastructure_failure', { reason: failure });
  }
  await gradingDone(engine, row.id);
  const summary = summarizeRun(engine.store, row.id);
  launch.onLine?.(
    `run ${row.id} [${launch.repeat}/${launch.repeats}]: ${agent.name} ${how}; ${failure ? `infrastructure failure: ${failure}` : `best ${summary.best ? `${summary.best.public} public / ${summary.best.private} private` : 'none'}`}`,
  );
  return {
    run_id: row.id,
    agent: agent.name,
    agent_version: launch.agentVersion,
    driver_model: driverModel ?? null,
    exit_code: outcome.exitCode,
    signal: outcome.signal,
    stopped_at_deadline: outcome.stoppedAtDeadline,
    interrupted: outcome.interrupted,
    killed: outcome.killed,
    infrastructure_failure: failure,
    retry_of: retryOf,
    summary,
  };
}

/**
 * Why a run is no result of the agent's, if it is not: the agent never got the a2rl tools
 * (its server never answered tools/list: no server, a server too slow for the client, a
 * configuration the CLI ignored); its model never completed a turn and no tool was called
 * (a model API refusing the key, unavailable or rate-limited for the whole run, whatever
 * stopped the agent); or it ended abnormally before its deadline (a model API or CLI error).
 * Stopped at the deadline or by the operator is otherwise a normal end.
 */
function infrastructureFailure(
  engine: Engine,
  runId: string,
  outcome: GroupOutcome,
  how: string,
  readModelActivity: () => ModelActivity | undefined,
): string | null {
  const toolCalled = engine.store.hasEvent(runId, 'tool');
  const abnormalExit = outcome.exitCode !== 0 && !outcome.stoppedAtDeadline && !outcome.interrupted;
  // A run that called tools and ended normally is the agent's: its transcript, however long, is not read.
  if (toolCalled && !abnormalExit) return null;
  const model = readModelActivity();
  const lastError = model?.lastError ? ` (last error: ${model.lastError})` : '';
  if (!engine.store.hasEvent(runId, 'session', 'tools_listed') && !toolCalled) {
    return `the agent never had the a2rl tools (its MCP server never listed them); the agent ${how}${lastError}`;
  }
  if (model && !model.answered && !toolCalled) return `the model never answered${lastError}; the agent ${how}`;
  return abnormalExit ? `the agent ${how}${lastError}` : null;
}

/**
 * The agent's model activity from its transcript and stderr, for agents driven by a model. The transcript is read a
 * line at a time (an agent can make it larger than one string holds); of stderr, the last MiB, where retries end.
 */
function modelActivityOf(agent: AgentKind, transcript: string, stderr: string): ModelActivity | undefined {
  if (!agent.modelActivity) return undefined;
  return agent.modelActivity(existsSync(transcript) ? fileLines(transcript) : '', existsSync(stderr) ? tailOf(stderr, 2 ** 20) : '');
}

/** The last `bytes` of a file, as text. */
function tailOf(path: string, bytes: number): string {
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    const buffer = Buffer.alloc(Math.min(size, bytes));
    readSync(fd, buffer, 0, buffer.length, size - buffer.length);
    return buffer.toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/** How a run stopped at its wall-clock deadline ends, on either transport: the words its server uses. */
const wallClockEndReason = 'wall-clock budget exhausted';

/**
 * At the deadline, the run's server (behind the bridge, or the launcher's `serve --http`) ends
 * the run itself within a second; the agent is stopped once it has, so that the server's
 * reason, not the agent's disconnection, is what the run records. No wait when nothing else serves it.
 */
async function serverEndedRun(engine: Engine, runId: string): Promise<void> {
  for (let waited = 0; waited < 10_000; waited += 100) {
    const row = engine.store.getRun(runId);
    if (!row || row.state === 'ended' || row.owner === engine.owner || !ownerAlive(row.owner)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
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

/** The agent CLI's version, recorded with every run: one that cannot be read is refused before any run is made. */
export function versionOf(executable: string, agent: Pick<AgentKind, 'name' | 'versionArgs'>): string {
  const args = agent.versionArgs ?? ['--version'];
  let output: string;
  try {
    // A loaded host can take a minute to start a Node CLI: only a CLI that fails or hangs longer is refused.
    output = execFileSync(executable, args, { encoding: 'utf8', timeout: 180_000, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    const reason = (error as { stderr?: string }).stderr?.trim().split('\n').at(-1) || (error as Error).message;
    throw new A2rlError(
      'UNAVAILABLE',
      `Cannot read ${agent.name}'s version (${executable} ${args.join(' ')}: ${reason}); runs record it. Fix or reinstall the CLI (scripts/setup.sh), then run this again.`,
    );
  }
  const version = output.trim().split('\n')[0]?.trim();
  if (!version) {
    throw new A2rlError(
      'UNAVAILABLE',
      `Cannot read ${agent.name}'s version: ${executable} ${args.join(' ')} printed nothing; runs record it. Fix or reinstall the CLI (scripts/setup.sh), then run this again.`,
    );
  }
  return version;
}

/** How long `a2rl run --transport http` waits for its `serve --http` to print its address. */
export const httpServerStartSeconds = 180;

/**
 * A `serve --http` child on a free loopback port, on the launcher's home, for agents that connect over HTTP; `startMs`
 * is how long it took to listen. The child is ended on every path: a failed or slow start, `stop()`, the launcher's
 * own exit, and its death by a signal, when no exit handler runs (the server ends with its parent: `endWithParent`).
 */
export async function startHttpServer(
  home: string,
  serveArgs: string[],
  startSeconds = httpServerStartSeconds,
): Promise<{ url: string; owner: string; startMs: number; stop: () => Promise<void> }> {
  const startedAt = Date.now();
  // Without the admin token: no agent can create runs through the server its launcher started.
  const child: ChildProcess = spawn(process.execPath, [cliEntry, '--home', home, 'serve', '--http', '--port', '0', ...serveArgs], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: serverEnvironment(),
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const endOnExit = () => child.kill('SIGKILL');
  process.once('exit', endOnExit);
  const end = async () => {
    // SIGTERM: the server stops accepting, stops the runs' jobs, lets grading in flight finish and exits.
    child.kill('SIGTERM');
    await exited;
    process.removeListener('exit', endOnExit);
  };
  let url: string;
  try {
    url = await new Promise<string>((resolve, reject) => {
      let stderr = '';
      let listening = false;
      const timer = setTimeout(
        () =>
          reject(
            new A2rlError(
              'UNAVAILABLE',
              `serve --http did not print "listening on http://…" within ${startSeconds} s, so no agent could connect; it was stopped. Its stderr: ${stderr.trim() || '(nothing)'}`,
            ),
          ),
        startSeconds * 1000,
      );
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
  } catch (error) {
    await end();
    throw error;
  }
  return { url, owner: ownerOf(child.pid!), startMs: Date.now() - startedAt, stop: end };
}
