import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, existsSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tools } from '../tools/index.js';
import { runAgentOf } from '../src/launch/agent-events.js';
import { agentKind, findExecutable } from '../src/launch/agents.js';
import { relayEntry } from '../src/launch/bridge.js';
import { manualAgents, manualConfig, type ManualConfigOptions } from '../src/launch/manual-config.js';
import { ownerPid } from '../src/core/ownership.js';
import { oracleOf } from '../src/launch/demo.js';
import { buildLeaderboard, runResults } from '../src/reports/leaderboard.js';
import { runIntegrity } from '../src/integrity/verdict.js';
import type { LaunchedRun } from '../src/launch/launcher.js';
import { cliEntry, packageRoot } from '../src/util/paths.js';
import { summarizeRun } from '../src/reports/summary.js';
import { Store } from '../src/store/store.js';
import { getTask } from '../src/tasks/task.js';
import { parquetDictionaryBomb } from './helpers/parquet-bomb.js';
import { tempDir } from './helpers/sandbox.js';

const standIn = join(packageRoot, 'test', 'fixtures', 'stand-in-agent.mjs');
const toolNames = tools.map((tool) => tool.name).sort();

/** `claude`, `codex` and `gemini` on a PATH of their own, all the stand-in agent. */
const bin = tempDir('agents-bin');
for (const name of ['claude', 'codex', 'gemini']) symlinkSync(standIn, join(bin, name));
const agentPath = `${bin}${delimiter}${process.env.PATH}`;

/** One home for the stand-in runs, so the base model's baseline is graded once. */
const home = tempDir('launch');
const work = tempDir('launch-files');
// What --agent-bind shows a root launcher's agent, which runs as a uid of its own, must be readable by others.
chmodSync(work, 0o755);
/**
 * What the stand-in needs in its jail beside its own folder: a2rl's built replay player, the MCP SDK and its replays,
 * and its STAND_IN_* settings from the launcher's environment (which passes no variable the operator does not name).
 */
const standInArgs = [
  ...[join(packageRoot, 'dist'), join(packageRoot, 'node_modules'), work].map((path) => `--agent-bind=${path}`),
  '--agent-env=STAND_IN_*',
];
const shortReplay = join(work, 'short.jsonl');
writeFileSync(
  shortReplay,
  [
    { tool: 'read_instructions' },
    { tool: 'write_file', arguments: { path: 'code/hello.py', content: "print('hello')" } },
    { tool: 'exec', arguments: { command: 'python3 code/hello.py' }, expect: [{ field: 'output', equals: 'hello\n' }] },
    { tool: 'budget_status', expect: [{ field: 'run_state', equals: 'active' }] },
  ]
    .map((step) => JSON.stringify(step))
    .join('\n'),
);
/** A job and a wait on it: ids and waits for runs to-replay to turn into placeholders and until-conditions. */
const jobReplay = join(work, 'job.jsonl');
writeFileSync(
  jobReplay,
  [
    { tool: 'write_file', arguments: { path: 'code/hello.py', content: "print('hello')" } },
    { tool: 'run_training', arguments: { command: 'python3 code/hello.py' }, save: 'job' },
    {
      tool: 'job_status',
      arguments: { job_id: '${job.job_id}', wait_seconds: 20 },
      until: { field: 'jobs.0.state', in: ['succeeded', 'failed'] },
      expect: [{ field: 'jobs.0.state', equals: 'succeeded' }],
    },
  ]
    .map((step) => JSON.stringify(step))
    .join('\n'),
);
const instructionsOnly = join(work, 'instructions.jsonl');
writeFileSync(instructionsOnly, JSON.stringify({ tool: 'read_instructions' }));

interface Exit {
  code: number | null;
  stdout: string;
  stderr: string;
}

function a2rl(args: string[], env: Record<string, string> = {}, homeDir = home): Promise<Exit> {
  const child = spawn(process.execPath, [cliEntry, '--home', homeDir, ...args], {
    env: { ...process.env, PATH: agentPath, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}

async function launch(args: string[], env: Record<string, string>, homeDir = home, exitCode = 0): Promise<LaunchedRun[]> {
  const result = await a2rl(['run', '--task', 'micro-gsm8k', '--json', ...standInArgs, ...args], env, homeDir);
  expect(result.code, result.stderr).toBe(exitCode);
  return JSON.parse(result.stdout) as LaunchedRun[];
}

function withStore<T>(homeDir: string, use: (store: Store) => T): T {
  const store = new Store(join(homeDir, 'store.sqlite'));
  try {
    return use(store);
  } finally {
    store.close();
  }
}

const runDir = (runId: string, homeDir = home) => join(homeDir, 'runs', runId);
/** The agent's wait for its MCP server that the launcher measured and recorded, in s. */
const startupSeconds = (runId: string) =>
  withStore(home, (store) => {
    const launched = store.listEvents(runId, 'agent').find((event) => event.name === 'launched')!;
    return Math.ceil((JSON.parse(launched.data) as { mcp_start_timeout_ms: number }).mcp_start_timeout_ms / 1000);
  });
const standInSeen = (runId: string) =>
  JSON.parse(readFileSync(join(runDir(runId), 'agent', 'work', 'stand-in.json'), 'utf8')) as {
    name: string;
    argv: string[];
    cwd: string;
    pid: number;
    env: Record<string, string | null>;
  };
const transcriptOf = (runId: string) =>
  readFileSync(join(runDir(runId), 'agent', 'transcript.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, any>);
/** Live `serve --run` processes of a run: the servers the launcher's bridge started for its agent. */
const serversOf = (runId: string) =>
  readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').includes(`serve --run ${runId}`);
      } catch {
        return false;
      }
    });

const claudeBuiltins =
  'Agent,Bash,CronCreate,CronDelete,CronList,Edit,EnterWorktree,ExitWorktree,ListAgents,Monitor,NotebookEdit,Read,ReportFindings,ScheduleWakeup,SendMessage,Skill,TaskStop,WebFetch,WebSearch,Workflow,Write';
const geminiBuiltins = [
  'ShellTool',
  'ReadFileTool',
  'WriteFileTool',
  'EditTool',
  'GlobTool',
  'GrepTool',
  'RipGrepTool',
  'LSTool',
  'ReadManyFilesTool',
  'WebFetchTool',
  'WebSearchTool',
  'MemoryTool',
  'WriteTodosTool',
  'ActivateSkillTool',
  'AskUserTool',
  'GetInternalDocsTool',
  'ListBackgroundProcessesTool',
  'ReadBackgroundOutputTool',
  'EnterPlanModeTool',
  'ExitPlanModeTool',
  'TrackerAddDependencyTool',
  'TrackerCreateTaskTool',
  'TrackerGetTaskTool',
  'TrackerListTasksTool',
  'TrackerUpdateTaskTool',
  'TrackerVisualizeTool',
  'AgentTool',
  'UpdateTopicTool',
];

/** The command line each agent must get: everything but the prompt and the config paths is spelled out here. */
function expectedArgv(agent: string, runId: string, prompt: string, server: Record<string, unknown>): string[] {
  const agentDir = join(runDir(runId), 'agent');
  if (agent === 'claude-code') {
    return [
      '-p',
      prompt,
      '--output-format',
      'stream-json',
      '--verbose',
      '--strict-mcp-config',
      '--mcp-config',
      join(agentDir, 'mcp.json'),
      '--setting-sources',
      '',
      '--tools',
      '',
      '--allowedTools',
      'mcp__a2rl__*',
      '--disallowedTools',
      claudeBuiltins,
      '--model',
      'm1',
    ];
  }
  if (agent === 'codex') {
    const toml = (value: unknown): string =>
      Array.isArray(value)
        ? `[${value.map(toml).join(',')}]`
        : value !== null && typeof value === 'object'
          ? `{${Object.entries(value)
              .map(([k, v]) => `${k}=${toml(v)}`)
              .join(',')}}`
          : JSON.stringify(value);
    return [
      'exec',
      '--json',
      '--skip-git-repo-check',
      '--sandbox',
      'read-only',
      '-c',
      `mcp_servers.a2rl=${toml({ ...server, required: true, default_tools_approval_mode: 'approve' })}`,
      '-c',
      'features.shell_tool=false',
      '-c',
      'features.unified_exec=false',
      '-c',
      'features.view_image=false',
      '-c',
      'features.multi_agent=false',
      '-c',
      'features.goals=false',
      ...['code_mode', 'code_mode_only', 'plugins', 'remote_plugin'].flatMap((feature) => ['-c', `features.${feature}=false`]),
      '-c',
      'web_search="disabled"',
      '-c',
      'approval_policy="never"',
      '--model',
      'm1',
      prompt,
    ];
  }
  return ['-p', prompt, '--output-format', 'stream-json', '--approval-mode', 'yolo', '--allowed-mcp-server-names', 'a2rl', '--model', 'm1'];
}

/** Over stdio every jailed agent starts the relay to the launcher's bridge socket, bound into its jail. */
const stdioServer = { command: process.execPath, args: [relayEntry, '/run/a2rl/mcp.sock'] };

describe('a2rl run: launching agents', { timeout: 300_000 }, () => {
  const prompts = new Map<string, string>();

  it.each([
    ['claude-code', 'claude'],
    ['codex', 'codex'],
    ['gemini-cli', 'gemini'],
  ])(
    '%s over stdio: exact command line, MCP configuration naming only this server, built-in tools off, transcript and metadata recorded',
    async (agent, executable) => {
      const [launched] = await launch(['--agent', agent, '--model', 'm1', '--budget', 'wall=3m'], { STAND_IN_REPLAY: shortReplay });
      const runId = launched!.run_id;
      expect(launched).toMatchObject({
        agent,
        agent_version: `${executable} stand-in 9.9.9`,
        driver_model: 'm1',
        exit_code: 0,
        signal: null,
      });
      expect(launched!.stopped_at_deadline).toBe(false);

      const agentDir = join(runDir(runId), 'agent');
      const prompt = readFileSync(join(agentDir, 'prompt.md'), 'utf8');
      prompts.set(agent, prompt);
      const seen = standInSeen(runId);
      // A fresh, empty working folder of its own.
      expect(seen.cwd).toBe(join(agentDir, 'work'));
      expect(readdirSync(seen.cwd)).toEqual(['stand-in.json']);
      const startup_timeout_sec = startupSeconds(runId);
      expect(startup_timeout_sec).toBeGreaterThanOrEqual(120);
      expect(seen.argv).toEqual(expectedArgv(agent, runId, prompt, { ...stdioServer, startup_timeout_sec, tool_timeout_sec: 120 }));

      // A private HOME in the jail, prepared by the launcher.
      expect(seen.env.HOME).toBe(join(agentDir, 'home'));
      if (agent === 'claude-code') {
        expect(JSON.parse(readFileSync(join(agentDir, 'mcp.json'), 'utf8'))).toEqual({
          mcpServers: { a2rl: { type: 'stdio', ...stdioServer } },
        });
        expect(seen.env.MCP_CONNECTION_NONBLOCKING).toBe('0');
        expect(seen.env.MCP_TIMEOUT).toBe(String(startup_timeout_sec * 1000));
      }
      if (agent === 'codex') expect(seen.env.CODEX_HOME).toBe(join(agentDir, 'home', '.codex'));
      if (agent === 'gemini-cli') {
        expect(seen.env.GEMINI_CLI_TRUST_WORKSPACE).toBe('true');
        expect(JSON.parse(readFileSync(join(agentDir, 'home', '.gemini', 'settings.json'), 'utf8'))).toEqual({
          mcpServers: { a2rl: { ...stdioServer, trust: true, timeout: startup_timeout_sec * 1000 } },
          mcp: { allowed: ['a2rl'] },
          tools: { exclude: geminiBuiltins },
          security: { auth: { selectedType: 'gemini-api-key' } },
        });
      }

      // The agent's own transcript (its stdout), kept with the run.
      const transcript = transcriptOf(runId);
      expect(transcript[0]).toMatchObject({ type: 'init', agent: executable, transport: 'stdio' });
      expect([...transcript[0]!.tools].sort()).toEqual(toolNames);
      expect(transcript.filter((event) => event.type === 'tool_result').map((event) => event.name)).toEqual([
        'read_instructions',
        'write_file',
        'exec',
        'budget_status',
      ]);
      expect(transcript.at(-1)).toEqual({ type: 'result', ok: true });
      // Its MCP server, behind the bridge, went with it.
      expect(serversOf(runId)).toEqual([]);

      withStore(home, (store) => {
        expect(runAgentOf(store, runId)).toMatchObject({
          agent,
          agent_version: `${executable} stand-in 9.9.9`,
          driver_model: 'm1',
          repeat: 1,
          exit_code: 0,
          signal: null,
          stopped_at_deadline: false,
          transcript: join(agentDir, 'transcript.jsonl'),
        });
        const run = store.getRun(runId)!;
        expect(run.state).toBe('ended');
        expect(run.infrastructure_failure).toBeNull();
        expect(run.label).toBe(`${agent}/m1`);
        expect(run).toMatchObject({ agent, agent_version: `${executable} stand-in 9.9.9`, driver_model: 'm1' });
        const session = store.listEvents(runId, 'session')[0]!;
        expect(JSON.parse(session.data).client.name).toBe(`${executable}-stand-in`);
        expect(store.listEvents(runId, 'tool').map((event) => event.name)).toEqual([
          'read_instructions',
          'write_file',
          'exec',
          'budget_status',
        ]);
        // No job or grading is left running once a2rl run returns.
        expect(store.listJobs(runId).filter((job) => job.state === 'running')).toEqual([]);
      });
    },
  );

  it('gives every agent the same task prompt, made from the task instructions', () => {
    expect(prompts.size).toBe(3);
    const [first, ...others] = [...prompts.values()];
    for (const other of others) expect(other).toBe(first);
    expect(first).toContain('Micro GSM8K: arithmetic word problems');
    expect(first).toContain('A tiny base model writes answers to arithmetic');
    expect(first).toContain('read_instructions');
    expect(first).not.toMatch(/\{\{|claude|codex|gemini/i);
  });

  it.each([
    ['codex', 'codex'],
    ['gemini-cli', 'gemini'],
  ])('%s over HTTP: the run token reaches the agent outside its command line and opens the run', async (agent, executable) => {
    const [launched] = await launch(['--agent', agent, '--transport', 'http', '--model', 'm1', '--budget', 'wall=3m'], {
      STAND_IN_REPLAY: shortReplay,
    });
    const runId = launched!.run_id;
    expect(launched!.exit_code).toBe(0);
    const seen = standInSeen(runId);
    const transcript = transcriptOf(runId);
    expect(transcript[0]).toMatchObject({ type: 'init', agent: executable, transport: 'http' });
    expect(transcript.at(-1)).toEqual({ type: 'result', ok: true });
    const agentDir = join(runDir(runId), 'agent');
    let url: string;
    if (agent === 'codex') {
      const token = seen.env.A2RL_RUN_TOKEN!;
      expect(token).toMatch(/^[\w-]{43}$/);
      expect(seen.argv.join(' ')).not.toContain(token);
      const override = seen.argv.find((arg) => arg.startsWith('mcp_servers.a2rl='))!;
      url = /url="([^"]+)"/.exec(override)![1]!;
      expect(seen.argv).toEqual(
        expectedArgv(agent, runId, readFileSync(join(agentDir, 'prompt.md'), 'utf8'), {
          url,
          bearer_token_env_var: 'A2RL_RUN_TOKEN',
          startup_timeout_sec: startupSeconds(runId),
          tool_timeout_sec: 120,
        }),
      );
    } else {
      const settings = JSON.parse(readFileSync(join(agentDir, 'home', '.gemini', 'settings.json'), 'utf8'));
      url = settings.mcpServers.a2rl.httpUrl;
      expect(settings.mcpServers.a2rl.headers.Authorization).toMatch(/^Bearer [\w-]{43}$/);
      expect(settings.tools.exclude).toEqual(geminiBuiltins);
    }
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    withStore(home, (store) => {
      expect(store.getRunToken(runId)!.revoked_at).not.toBeNull();
      expect(store.getRun(runId)!.state).toBe('ended');
      expect(store.listEvents(runId, 'tool')).toHaveLength(4);
    });
  });

  it("hands an HTTP run to the launcher's own server: another server on the same home, which adopts ownerless runs, never takes it", async () => {
    const before = withStore(home, (store) => store.listRuns().length);
    const launching = launch(['--agent', 'codex', '--transport', 'http', '--budget', 'wall=3m'], {
      STAND_IN_REPLAY: instructionsOnly,
      STAND_IN_CONNECT_AFTER_MS: '8000',
    });
    // Once the launcher has made the run and its token, another server starts on the home: it adopts, as it starts, every
    // active HTTP run whose owner is not alive, as a run left by `a2rl runs create` is.
    for (
      let tries = 0;
      withStore(home, (store) =>
        store
          .listRuns()
          .slice(before)
          .every((run) => !store.getRunToken(run.id)),
      );
      tries++
    ) {
      expect(tries).toBeLessThan(300);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const other = spawn(process.execPath, [cliEntry, '--home', home, 'serve', '--http', '--port', '0'], { stdio: 'ignore' });
    try {
      const launched = await launching;
      expect(launched).toHaveLength(1);
      expect(launched[0]).toMatchObject({ exit_code: 0, infrastructure_failure: null });
      const adopted = withStore(home, (store) => store.listEvents(launched[0]!.run_id, 'run').filter((event) => event.name === 'adopted'));
      expect(adopted.map((event) => ownerPid(JSON.parse(event.data).owner))).not.toContain(other.pid);
    } finally {
      other.kill('SIGTERM');
    }
  });

  it('stops an agent that ignores TERM at the wall clock plus the grace: TERM, then KILL, whole process group', async () => {
    const started = Date.now();
    const [launched] = await launch(['--agent', 'claude-code', '--budget', 'wall=25s', '--grace', '3'], {
      STAND_IN_REPLAY: instructionsOnly,
      STAND_IN_IGNORE_TERM: '1',
    });
    const elapsed = (Date.now() - started) / 1000;
    const runId = launched!.run_id;
    expect(launched).toMatchObject({ exit_code: null, signal: 'SIGKILL', stopped_at_deadline: true, killed: true });
    const transcript = transcriptOf(runId);
    // It got TERM first, and ignored it.
    expect(transcript).toContainEqual({ type: 'signal', signal: 'SIGTERM', ignored: true });
    expect(serversOf(runId)).toEqual([]);
    withStore(home, (store) => {
      const run = store.getRun(runId)!;
      const created = run.created_at;
      const exited = store.listEvents(runId, 'agent').find((event) => event.name === 'exited')!;
      // KILL came 25 s + 3 s after the run was created (and once its server had ended it); not before, and not much later.
      expect(exited.at - created).toBeGreaterThanOrEqual(28_000);
      expect(exited.at - created).toBeLessThan(35_000);
      expect(run.state).toBe('ended');
      // Its server ended it at the deadline, before the agent went: the end reason of an HTTP run at its deadline too.
      expect(run.end_reason).toBe('wall-clock budget exhausted');
    });
    expect(elapsed).toBeLessThan(60);
  });

  it("passes the operator's SIGTERM on to the agent's process group: TERM, then KILL after the grace", async () => {
    const child = spawn(
      process.execPath,
      [cliEntry, '--home', home, 'run', '--task', 'micro-gsm8k', '--json', ...standInArgs, '--agent', 'gemini-cli', '--grace', '2'],
      {
        env: { ...process.env, PATH: agentPath, STAND_IN_REPLAY: instructionsOnly, STAND_IN_IGNORE_TERM: '1' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk));
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk;
    });
    const closed = new Promise<number | null>((resolve) => child.once('close', resolve));
    // Once the agent has played its replay, the operator stops the launcher.
    const runId = await new Promise<string>((resolve) => {
      const poll = setInterval(() => {
        const id = /run (\S+) \[1\/1\]: gemini-cli started/.exec(stderr)?.[1];
        const transcript = id ? join(runDir(id), 'agent', 'transcript.jsonl') : '';
        if (id && existsSync(transcript) && readFileSync(transcript, 'utf8').includes('"type":"result"')) {
          clearInterval(poll);
          resolve(id);
        }
      }, 200);
    });
    const signalled = Date.now();
    child.kill('SIGTERM');
    expect(await closed).toBe(0);
    const [launched] = JSON.parse(stdout) as LaunchedRun[];
    expect(launched).toMatchObject({ run_id: runId, signal: 'SIGKILL', stopped_at_deadline: false, interrupted: true, killed: true });
    expect(transcriptOf(runId)).toContainEqual({ type: 'signal', signal: 'SIGTERM', ignored: true });
    withStore(home, (store) => {
      const exited = store.listEvents(runId, 'agent').find((event) => event.name === 'exited')!;
      expect(JSON.parse(exited.data)).toMatchObject({ interrupted: true, killed: true });
      expect(exited.at - signalled).toBeGreaterThanOrEqual(2_000);
      // Its server got the TERM too, and ended the run itself.
      expect(store.getRun(runId)!.end_reason).toBe('the server received SIGTERM');
    });
  });

  it('runs any command as an agent, N independent runs K at once; an abnormal exit is an infrastructure failure, retried once, and a2rl run exits 1', async () => {
    const results = await launch(
      ['--agent', `command:${process.execPath} ${standIn}`, `--agent-bind=${dirname(standIn)}`, '--repeats', '2', '--parallel', '2'],
      { STAND_IN_REPLAY: instructionsOnly, STAND_IN_EXIT_CODE: '3' },
      home,
      1,
    );
    // Two repeats, each retried once after exiting 3: four runs.
    expect(results).toHaveLength(4);
    expect(new Set(results.map((r) => r.run_id)).size).toBe(4);
    const firsts = results.filter((r) => r.retry_of === null);
    expect(firsts).toHaveLength(2);
    for (const first of firsts) expect(results.filter((r) => r.retry_of === first.run_id)).toHaveLength(1);
    for (const result of results) {
      expect(result).toMatchObject({
        agent: 'command',
        agent_version: null,
        exit_code: 3,
        infrastructure_failure: 'the agent exited with code 3',
      });
      const seen = standInSeen(result.run_id);
      const agentDir = join(runDir(result.run_id), 'agent');
      expect(seen.env.A2RL_MCP_CONFIG).toBe(join(agentDir, 'mcp.json'));
      expect(seen.env.A2RL_PROMPT).toBe(readFileSync(join(agentDir, 'prompt.md'), 'utf8'));
    }
    withStore(home, (store) => {
      const agents = firsts.map((result) => runAgentOf(store, result.run_id)!);
      expect(agents[0]!.batch).toBe(agents[1]!.batch);
      expect(agents.map((a) => a.repeat).sort()).toEqual([1, 2]);
      // Both ran at once.
      const spans = firsts.map((result) => {
        const events = store.listEvents(result.run_id, 'agent');
        return [events.find((e) => e.name === 'launched')!.at, events.find((e) => e.name === 'exited')!.at];
      });
      expect(spans[0]![0]!).toBeLessThan(spans[1]![1]!);
      expect(spans[1]![0]!).toBeLessThan(spans[0]![1]!);
      for (const result of results) {
        expect(store.getRun(result.run_id)!.infrastructure_failure).toBe('the agent exited with code 3');
        expect(store.listEvents(result.run_id, 'run').map((e) => e.name)).toContain('infrastructure_failure');
      }
    });
  });

  it('a2rl run --parallel 2 whose agents plant a Parquet bomb exits normally, each run marked incomplete, never clean', async () => {
    const bomb = parquetDictionaryBomb().toString('base64');
    const bombReplay = join(work, 'bomb.jsonl');
    const plant = `python3 -c "import base64; open('output/bomb.parquet', 'wb').write(base64.b64decode('${bomb}'))"`;
    writeFileSync(bombReplay, JSON.stringify({ tool: 'exec', arguments: { command: plant }, expect: [{ field: 'exit_code', equals: 0 }] }));
    const results = await launch(
      ['--agent', `command:${process.execPath} ${standIn}`, `--agent-bind=${dirname(standIn)}`, '--repeats', '2', '--parallel', '2'],
      { STAND_IN_REPLAY: bombReplay },
    );
    expect(results.map((result) => result.infrastructure_failure)).toEqual([null, null]);
    withStore(home, (store) => {
      for (const result of results) expect(runIntegrity(store, result.run_id)).toMatchObject({ verdict: 'incomplete', flagged: false });
    });
  });

  it('starts at most one server behind the bridge: the socket opened 20 times starts one, refuses the rest, and it is gone with the run', async () => {
    // A command agent that opens its MCP socket 20 times and holds every connection, speaking MCP on the first;
    // it waits (for the test to count servers) until the test drops a file in its folder.
    const probe = join(work, 'bridge-probe.py');
    writeFileSync(
      probe,
      String.raw`
import json, os, socket, time
config = json.load(open(os.environ["A2RL_MCP_CONFIG"]))
path = list(config["mcpServers"].values())[0]["args"][-1]
connections = []
for _ in range(20):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.settimeout(60)
    connections.append(s)
def read_all(s):
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data.decode()
        data += chunk
refusals = [read_all(s) for s in connections[1:]]
session = connections[0].makefile("rwb")
for message in [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]:
    session.write((json.dumps(message) + "\n").encode())
session.flush()
while True:
    answer = json.loads(session.readline())
    if answer.get("id") == 2:
        break
json.dump({"refusals": refusals, "tools": len(answer["result"]["tools"])}, open("probe.json", "w"))
while not os.path.exists("done"):
    time.sleep(0.1)
`,
    );
    const runsOf = () => (existsSync(join(home, 'runs')) ? readdirSync(join(home, 'runs')) : []);
    const runsBefore = new Set(runsOf());
    const launching = launch(['--agent', `command:python3 ${probe}`, '--budget', 'wall=3m'], {});
    let runId: string | undefined;
    let seen: { refusals: string[]; tools: number } | undefined;
    let over = false;
    void launching.then(
      () => (over = true),
      () => (over = true),
    );
    while (!seen && !over) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      runId ??= runsOf().find((id) => !runsBefore.has(id));
      const answers = runId && join(runDir(runId), 'agent', 'work', 'probe.json');
      if (answers && existsSync(answers)) seen = JSON.parse(readFileSync(answers, 'utf8'));
    }
    // While all 20 are open: one server, which answered the first; 19 refusals, each one JSON-RPC error line.
    if (!seen) await launching;
    expect(serversOf(runId!)).toHaveLength(1);
    expect(seen!.tools).toBe(toolNames.length);
    expect(seen!.refusals).toHaveLength(19);
    for (const refusal of seen!.refusals) {
      expect(JSON.parse(refusal)).toMatchObject({
        jsonrpc: '2.0',
        id: null,
        error: { message: expect.stringMatching(/^\[CONFLICT\] This run's MCP server is already connected/) },
      });
    }
    writeFileSync(join(runDir(runId!), 'agent', 'work', 'done'), '');
    const [launched] = await launching;
    expect(launched).toMatchObject({ run_id: runId, exit_code: 0, infrastructure_failure: null });
    expect(serversOf(runId!)).toEqual([]);
    // The first five refusals noted one by one, then only their count: a probe in a loop cannot fill the disk.
    const serverLog = readFileSync(join(runDir(runId!), 'agent', 'server-stderr.log'), 'utf8');
    expect(serverLog.match(/a2rl bridge: refused a connection/g)).toHaveLength(5);
    expect(serverLog).toContain('a2rl bridge: refused 19 connections in all');
  });

  it('marks a run whose agent never had the tools an infrastructure failure, retries it, exits 1, and the leaderboard counts it apart', async () => {
    const lonely = tempDir('launch-no-tools');
    const results = await launch(['--agent', 'command:true', '--label', 'never-connects'], {}, lonely, 1);
    expect(results).toHaveLength(2);
    expect(results[1]!.retry_of).toBe(results[0]!.run_id);
    for (const result of results) {
      expect(result.exit_code).toBe(0);
      expect(result.infrastructure_failure).toMatch(/^the agent never had the a2rl tools/);
    }
    withStore(lonely, (store) => {
      const results = runResults(store);
      expect(results.map((result) => result.infrastructure_failure)).toEqual([
        expect.stringMatching(/^the agent never had the a2rl tools/),
        expect.stringMatching(/^the agent never had the a2rl tools/),
      ]);
      // Counted apart, never as a result, and always shown: alone they make a row of no run and two failures; with a
      // run that worked beside them, the row has one run and two failures.
      const worked = { ...results[0]!, run_id: 'worked', infrastructure_failure: null };
      expect(buildLeaderboard(results)).toEqual([
        expect.objectContaining({ agent: 'command', runs: 0, mean: null, infrastructure_failures: 2 }),
      ]);
      expect(buildLeaderboard([...results, worked])).toEqual([
        expect.objectContaining({ agent: 'command', runs: 1, infrastructure_failures: 2 }),
      ]);
    });
  });

  it('refuses an agent that is not installed, naming its npm package, and creates no run', async () => {
    const lonely = tempDir('launch-lonely');
    for (const [agent, pkg] of [
      ['claude-code', '@anthropic-ai/claude-code'],
      ['codex', '@openai/codex'],
      ['gemini-cli', '@google/gemini-cli'],
    ]) {
      // Neither on PATH nor where scripts/setup.sh installs agents.
      expect(() => findExecutable(agentKind(agent!), '/usr/bin:/bin', lonely)).toThrow(`npm install -g ${pkg}`);
    }
    const unknown = await a2rl(['run', '--agent', 'cursor', '--task', 'micro-gsm8k'], {}, lonely);
    expect(unknown.code).toBe(2); // the exit status of bad input (src/util/errors.ts, exitStatuses)
    expect(unknown.stderr).toMatch(/Unknown agent "cursor".*claude-code, codex, gemini-cli, opencode, qwen-code, openhands, replay:FILE/);
    const noReplay = await a2rl(['run', '--agent', `replay:${join(lonely, 'missing.jsonl')}`, '--task', 'micro-gsm8k'], {}, lonely);
    expect(noReplay.code).toBe(3);
    expect(noReplay.stderr).toContain(`No replay file at ${join(lonely, 'missing.jsonl')}`);
    // A folder the jail would show that holds the store is refused too (one holding tasks/: test/agent-bind.test.ts).
    const exposing = await a2rl(['run', '--agent', 'command:true', '--task', 'micro-gsm8k', `--agent-bind=${dirname(lonely)}`], {}, lonely);
    expect(exposing.code).toBe(6);
    expect(exposing.stderr).toContain(`The agent's jail cannot show ${dirname(lonely)}: it holds the store`);
    // a2rl's own variables (the admin token, the judge's key) are never passed on, named or not.
    const secret = await a2rl(['run', '--agent', 'command:true', '--task', 'micro-gsm8k', '--agent-env', 'A2RL_ADMIN_TOKEN'], {}, lonely);
    expect(secret.code).toBe(2); // bad input: the variable is named on the command line
    expect(secret.stderr).toContain("a2rl's own variables (A2RL_*: the admin token, the judge's key) never enter the agent's jail");
    // Refused before anything was opened: no store, no run.
    expect(existsSync(join(lonely, 'store.sqlite'))).toBe(false);
    expect(existsSync(join(lonely, 'runs'))).toBe(false);
    // Parallel runs over stdio have a server each: they must not be handed the same GPUs.
    const sharedGpus = await a2rl(
      ['run', '--agent', 'command:true', '--task', 'micro-gsm8k', '--gpus', '0', '--parallel', '2'],
      {},
      lonely,
    );
    expect(sharedGpus.code).toBe(2);
    expect(sharedGpus.stderr).toContain("would give each run's own server the same GPUs; add --transport http");
    expect(existsSync(join(lonely, 'runs'))).toBe(false);
  });
});

describe('a2rl agent-config', () => {
  it('prints for each CLI and transport the script docs/operating.md quotes, and refuses what does not apply', async () => {
    const operating = readFileSync(join(packageRoot, 'docs', 'operating.md'), 'utf8');
    const docsHome = '/path/to/a2rl-home';
    for (const agent of manualAgents) {
      for (const transport of ['stdio', 'http'] as const) {
        const script = manualConfig({ agent, home: docsHome, transport, ...(transport === 'stdio' ? { task: 'micro-gsm8k' } : {}) });
        // The docs show this checkout as /path/to/a2rl-bench, and the CLI where scripts/setup.sh installs it.
        const kind = agentKind(agent);
        const shown = script
          .replace(findExecutable(kind)!, join('/path/to/a2rl-bench/.agents/node_modules/.bin', kind.executable!))
          .replaceAll(packageRoot, '/path/to/a2rl-bench')
          .replaceAll(process.execPath, '/usr/bin/node')
          // Codex's catalog entry for its model (90 KB, its instructions) is shown abridged.
          .replace(
            /^\{"models":\[\{"slug":("[^"]+").*\}$/m,
            `{"models":[{"slug":$1, … its entry of Codex's catalog (90 KB), "tool_mode":null, …}]}`,
          );
        expect(operating, `${agent} over ${transport}`).toContain(`\`\`\`sh\n${shown}\`\`\``);
      }
    }
    // The command prints that script.
    const printed = await a2rl(['agent-config', 'codex', '--transport', 'http'], {}, docsHome);
    expect(printed.code, printed.stderr).toBe(0);
    // It names the CLI a2rl run would start: here the stand-in first on PATH.
    expect(printed.stdout).toBe(
      manualConfig({ agent: 'codex', home: docsHome, transport: 'http' }).replace(findExecutable(agentKind('codex'))!, join(bin, 'codex')),
    );
    const refused = await a2rl(['agent-config', 'replay:x.jsonl', '--task', 'micro-gsm8k'], {}, docsHome);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('Allowed choices are claude-code, codex, gemini-cli, opencode, qwen-code');
    const refusals: Array<[ManualConfigOptions, string]> = [
      [{ agent: 'claude-code', home: docsHome, transport: 'stdio' }, 'Over stdio the script makes a new run: give its task with --task'],
      [{ agent: 'codex', home: docsHome, transport: 'http', task: 'micro-gsm8k' }, 'over HTTP the run is the one a2rl runs create made'],
      [
        { agent: 'gemini-cli', home: docsHome, transport: 'stdio', task: 'micro-gsm8k', url: 'http://127.0.0.1:8700/mcp' },
        '--url is for --transport http',
      ],
    ];
    for (const [options, message] of refusals) expect(() => manualConfig(options)).toThrow(message);
  });
});

describe('replays', { timeout: 30 * 60_000 }, () => {
  let server: ChildProcess | undefined;
  afterAll(() => void server?.kill('SIGTERM'));

  it('a2rl replay plays against a run of a remote server (--url, --token), replays what runs to-replay made of it, and exits 1 when an expectation fails', async () => {
    const remote = tempDir('replay-remote');
    server = spawn(process.execPath, [cliEntry, '--home', remote, 'serve', '--http', '--port', '0'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const url = await new Promise<string>((resolve) => {
      let stderr = '';
      server!.stderr!.on('data', (chunk: Buffer) => {
        stderr += chunk;
        const match = /listening on (http:\/\/\S+)/.exec(stderr);
        if (match) resolve(`${match[1]}/mcp`);
      });
    });
    const created = await a2rl(['runs', 'create', '--task', 'micro-gsm8k', '--json'], {}, remote);
    const { token } = JSON.parse(created.stdout) as { token: string };
    const passing = await a2rl(['replay', jobReplay, '--url', url, '--token', token], {}, remote);
    expect(passing.code, passing.stderr).toBe(0);
    expect(
      passing.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line).tool),
    ).toEqual(['write_file', 'run_training', 'job_status']);

    // That run, turned back into a replay, plays against another run of the server.
    const recorded = withStore(remote, (store) => store.listRuns()[0]!.id);
    const converted = await a2rl(['runs', 'to-replay', recorded], {}, remote);
    expect(converted.code, converted.stderr).toBe(0);
    const lines = converted.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, any>);
    expect(lines.map((line) => line.tool)).toEqual(['write_file', 'run_training', 'job_status']);
    expect(lines[1]!.save).toBe('run_training_2');
    expect(lines[2]).toMatchObject({
      arguments: { job_id: '${run_training_2.job_id}', wait_seconds: 20 },
      until: { field: 'jobs.0.state', in: expect.arrayContaining(['succeeded', 'failed']) },
      expect: [{ field: 'jobs.0.state', equals: 'succeeded' }],
    });
    const again = join(work, 'again.jsonl');
    writeFileSync(again, converted.stdout);
    const second = JSON.parse((await a2rl(['runs', 'create', '--task', 'micro-gsm8k', '--json'], {}, remote)).stdout) as { token: string };
    const replayed = await a2rl(['replay', again, '--url', url, '--token', second.token], {}, remote);
    expect(replayed.code, replayed.stderr).toBe(0);

    const failing = join(work, 'failing.jsonl');
    writeFileSync(failing, JSON.stringify({ tool: 'budget_status', expect: [{ field: 'run_state', equals: 'ended' }] }));
    const failed = await a2rl(['replay', failing, '--url', url], { A2RL_RUN_TOKEN: token }, remote);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('expected {"field":"run_state","equals":"ended"}, got run_state = "active"');
    const ambiguous = await a2rl(['replay', shortReplay, '--url', url, '--task', 'micro-gsm8k'], {}, remote);
    expect(ambiguous.code).toBe(2);
    expect(ambiguous.stderr).toContain('replay plays against one server');
  });

  it('a training run, turned back into a replay with runs to-replay, reaches the same score against a fresh server', async () => {
    // The oracle's own training script, shortened: the round trip needs a graded submission, not a good one (e2e plays the oracles).
    const task = getTask('micro-gsm8k');
    const trainingReplay = join(work, 'training.jsonl');
    const ended = ['succeeded', 'failed', 'cancelled', 'timed_out', 'oom_killed', 'budget_stopped', 'lost'];
    writeFileSync(
      trainingReplay,
      [
        {
          tool: 'write_file',
          arguments: { path: 'code/train.py', content: { $file: join(dirname(oracleOf(task, 'sft').replay), 'train.py') } },
        },
        { tool: 'run_training', arguments: { command: 'python3 code/train.py --steps 40 --warmup 5 --holdout 20' }, save: 'train' },
        {
          tool: 'job_status',
          arguments: { job_id: '${train.job_id}', wait_seconds: 30 },
          until: { field: 'jobs.0.state', in: ended },
          timeout_s: 600,
          expect: [{ field: 'jobs.0.state', equals: 'succeeded' }],
        },
        { tool: 'submit_artifact', arguments: { path: 'output/final' }, save: 'submission' },
        {
          tool: 'get_score',
          arguments: { submission_id: '${submission.submission_id}', wait_seconds: 30 },
          until: { field: 'submissions.0.state', in: ['graded', 'failed'] },
          timeout_s: 600,
          expect: [{ field: 'submissions.0.state', equals: 'graded' }],
        },
        { tool: 'get_score', arguments: { wait_seconds: 30 }, until: { field: 'baseline.state', equals: 'graded' }, timeout_s: 600 },
      ]
        .map((line) => JSON.stringify(line))
        .join('\n'),
    );
    const first = tempDir('oracle-first');
    const [launched] = await launch(['--agent', `replay:${trainingReplay}`], {}, first);
    expect(launched!.exit_code).toBe(0);
    const original = withStore(first, (store) => summarizeRun(store, launched!.run_id));
    expect(original.best).not.toBeNull();

    const replayFile = join(work, 'oracle-again.jsonl');
    const converted = await a2rl(['runs', 'to-replay', launched!.run_id, '--out', replayFile], {}, first);
    expect(converted.code, converted.stderr).toBe(0);
    const lines = readFileSync(replayFile, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, any>);
    // Ids returned earlier are placeholders; waits are until-conditions with the recorded outcome expected.
    const training = lines.find((line) => line.tool === 'run_training')!;
    const wait = lines.find((line) => line.tool === 'job_status' && line.arguments.job_id === `\${${training.save}.job_id}`)!;
    expect(wait.until).toEqual({ field: 'jobs.0.state', in: expect.arrayContaining(['succeeded', 'failed']) });
    expect(wait.expect).toEqual([{ field: 'jobs.0.state', equals: 'succeeded' }]);
    const submit = lines.find((line) => line.tool === 'submit_artifact')!;
    expect(lines.find((line) => line.tool === 'get_score' && line.arguments.submission_id)!.arguments.submission_id).toBe(
      `\${${submit.save}.submission_id}`,
    );
    expect(JSON.stringify(lines)).not.toMatch(/"(job|sub)-\d+"/);

    const second = tempDir('oracle-second');
    const replayed = await a2rl(['replay', replayFile, '--task', 'micro-gsm8k'], {}, second);
    expect(replayed.code, replayed.stderr).toBe(0);
    const again = withStore(second, (store) => summarizeRun(store, store.listRuns()[0]!.id));
    expect(again.best!.public).toBe(original.best!.public);
    expect(again.best!.private).toBe(original.best!.private);
    expect(again.baseline).toEqual(original.baseline);
  });
});
