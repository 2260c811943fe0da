import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tools } from '../tools/index.js';
import { agentKind, codexModelEntry, findExecutable } from '../src/launch/agents.js';
import type { LaunchedRun } from '../src/launch/launcher.js';
import { buildLeaderboard, runResults } from '../src/reports/leaderboard.js';
import { Store } from '../src/store/store.js';
import { cliEntry } from '../src/util/paths.js';
import { runUsage } from '../src/transcripts/run-usage.js';
import { tweakScript } from './helpers/mcp.js';
import {
  codexProvider,
  modelApiEnv,
  type ModelRequest,
  type ScriptStep,
  startFailingModelApi,
  startModelApi,
} from './helpers/model-apis.js';
import { tempDir } from './helpers/sandbox.js';

/**
 * The real agent CLIs, as scripts/setup.sh installs them (versions in docs/operating.md), each
 * launched by `a2rl run` in its jail over stdio and over HTTP, driven by a scripted model API
 * on loopback that speaks its provider's protocol. One run per CLI and transport serves every
 * assertion: the tools offered, every a2rl tool callable, built-ins refused, nothing of the
 * operator's own configuration reaching the model, a late server, the deadline, the exit code.
 */

const toolNames = tools.map((tool) => tool.name).sort();
const clis = [
  {
    agent: 'claude-code',
    /** How the CLI names this server's tools to the model, and what else it offers (nothing of the host). */
    offered: toolNames.map((name) => `mcp__a2rl__${name}`),
    builtins: [
      { tool: 'Bash', arguments: { command: 'touch pwned-by-shell' } },
      { tool: 'Write', arguments: { file_path: 'pwned-by-write', content: 'x' } },
    ],
  },
  {
    agent: 'codex',
    // MCP resources of this server, and a question to the user that nobody answers in exec mode.
    offered: [
      'list_mcp_resource_templates',
      'list_mcp_resources',
      'read_mcp_resource',
      'request_user_input',
      ...toolNames.map((name) => `mcp__a2rl__${name}`),
    ],
    builtins: [
      { tool: 'exec_command', arguments: { cmd: 'touch pwned-by-shell' } },
      { tool: 'apply_patch', arguments: { input: '*** Begin Patch\n*** Add File: pwned-by-write\n+x\n*** End Patch' } },
    ],
  },
  {
    agent: 'gemini-cli',
    offered: ['list_mcp_resources', 'read_mcp_resource', ...toolNames.map((name) => `mcp_a2rl_${name}`)],
    builtins: [
      { tool: 'run_shell_command', arguments: { command: 'touch pwned-by-shell' } },
      // Its write_file shares a2rl's name (offered as mcp_a2rl_write_file): its edit tool creates files too.
      { tool: 'replace', arguments: { file_path: 'pwned-by-write', old_string: '', new_string: 'x' } },
    ],
  },
  {
    agent: 'opencode',
    offered: toolNames.map((name) => `a2rl_${name}`),
    builtins: [
      { tool: 'bash', arguments: { command: 'touch pwned-by-shell', description: 'x' } },
      { tool: 'write', arguments: { filePath: 'pwned-by-write', content: 'x' } },
    ],
  },
  {
    agent: 'qwen-code',
    offered: toolNames.map((name) => `mcp__a2rl__${name}`),
    builtins: [
      { tool: 'run_shell_command', arguments: { command: 'touch pwned-by-shell' } },
      { tool: 'write_file', arguments: { file_path: 'pwned-by-write', content: 'x' } },
    ],
  },
] as const;

/**
 * The --model each CLI gets: none for Codex, as the README runs it, so it drives its catalog's default model (which
 * that catalog puts in "code mode"), and the run records the model a2rl named for it.
 */
const modelArgs = (agent: string) => (agent === 'codex' ? [] : ['--model', 'scripted-model']);
const driverModel = (agent: string) =>
  agent === 'codex' ? codexModelEntry(findExecutable(agentKind('codex'))!, undefined).model : 'scripted-model';

const home = tempDir('agents');
/** The operator's own HOME, full of configuration that must never reach a benchmarked agent. */
const operatorHome = tempDir('agents-operator');
const decoy = 'DECOY-INSTRUCTIONS-7f3a';
const decoyServer = { command: '/bin/sh', args: ['-c', `echo ${decoy}`] };
for (const [file, content] of [
  ['.claude/CLAUDE.md', decoy],
  ['.claude.json', JSON.stringify({ mcpServers: { decoy: decoyServer } })],
  ['.claude/settings.json', JSON.stringify({ env: { DECOY: decoy } })],
  ['.codex/AGENTS.md', decoy],
  ['.codex/config.toml', `[mcp_servers.decoy]\ncommand = "/bin/sh"\nargs = ["-c", "echo ${decoy}"]\n`],
  ['.gemini/GEMINI.md', decoy],
  ['.gemini/settings.json', JSON.stringify({ mcpServers: { decoy: decoyServer }, tools: { exclude: [] } })],
  ['.config/opencode/AGENTS.md', decoy],
  [
    '.config/opencode/opencode.json',
    JSON.stringify({ mcp: { decoy: { type: 'local', command: decoyServer.args } }, instructions: ['DECOY.md'] }),
  ],
  ['.qwen/QWEN.md', decoy],
  ['.qwen/settings.json', JSON.stringify({ mcpServers: { decoy: decoyServer } })],
] as const) {
  mkdirSync(join(operatorHome, file, '..'), { recursive: true });
  writeFileSync(join(operatorHome, file), content);
}
// Instruction files in a folder above every run's working folder.
for (const file of ['CLAUDE.md', 'AGENTS.md', 'GEMINI.md', 'QWEN.md']) writeFileSync(join(home, file), decoy);

/** Makes every `a2rl serve` start 5 s late (the agent's relay sees the bridge, the server behind it is slow). */
const lateServer = join(tempDir('agents-late'), 'late-server.cjs');
writeFileSync(lateServer, "if (process.argv.includes('serve')) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5000);\n");

/**
 * The job id the agent last got in a tool result, not one an error message names: the structured
 * result's `"job_id": "job-N"` (JSON-escaped in the history) or, where a CLI passes on only the text, `Started job-N`.
 */
const lastJobId = (request: ModelRequest) =>
  [...request.text.matchAll(/(?:job_id\\*"\s*:\s*\\*"|Started )(job-\d+)/g)].at(-1)?.[1] ?? 'job-0';

function script(builtins: ReadonlyArray<{ tool: string; arguments: Record<string, unknown> }>, end: 'text' | 'hang'): ScriptStep[] {
  return [
    { call: [{ tool: 'read_instructions' }] },
    { call: [{ tool: 'list_files', arguments: { path: '.', depth: 1 } }] },
    { call: [{ tool: 'read_file', arguments: { path: 'instructions.md', max_bytes: 200 } }] },
    { call: [{ tool: 'write_file', arguments: { path: 'code/note.txt', content: 'scripted' } }] },
    { call: [{ tool: 'exec', arguments: { command: tweakScript('output/tweaked', 1.01) } }] },
    { call: [{ tool: 'run_training', arguments: { command: 'sleep 120' } }] },
    (request) => ({ call: [{ tool: 'job_status', arguments: { job_id: lastJobId(request) } }] }),
    (request) => ({ call: [{ tool: 'job_logs', arguments: { job_id: lastJobId(request) } }] }),
    (request) => ({ call: [{ tool: 'cancel_job', arguments: { job_id: lastJobId(request) } }] }),
    { call: [{ tool: 'launch_rollouts', arguments: { episodes: 1 } }] },
    { call: [{ tool: 'submit_artifact', arguments: { path: 'output/tweaked' } }] },
    { call: [{ tool: 'get_score' }] },
    { call: [{ tool: 'budget_status' }] },
    { call: builtins.map((builtin) => ({ tool: builtin.tool, arguments: builtin.arguments })) },
    end === 'text' ? { text: 'Done: submitted output/tweaked.' } : { hang: true },
  ];
}

interface Launch {
  code: number | null;
  stderr: string;
  runs: LaunchedRun[];
  requests: ModelRequest[];
  stepsServed: number;
}

/** `a2rl run` of one CLI against the model API at `url`, the operator's HOME full of decoys. */
async function launchAgent(
  agent: string,
  transport: 'stdio' | 'http',
  url: string,
  options: { wall: string; grace: number; env?: Record<string, string> },
): Promise<Omit<Launch, 'requests' | 'stepsServed'>> {
  const args = [
    ...['--home', home, 'run', '--agent', agent, '--task', 'micro-gsm8k', '--transport', transport, '--json'],
    ...modelArgs(agent),
    ...['--budget', `wall=${options.wall},submissions=2`, '--grace', String(options.grace)],
    ...(agent === 'codex' ? codexProvider(url).map((arg) => `--agent-arg=${arg}`) : []),
  ];
  const child = spawn(process.execPath, [cliEntry, ...args], {
    env: { ...process.env, HOME: operatorHome, ...modelApiEnv(url), ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  return { code, stderr, runs: stdout ? (JSON.parse(stdout) as LaunchedRun[]) : [] };
}

async function benchmark(agent: string, transport: 'stdio' | 'http', end: 'text' | 'hang', wall: string): Promise<Launch> {
  const cli = clis.find((c) => c.agent === agent)!;
  const api = await startModelApi(script(cli.builtins, end));
  const launched = await launchAgent(agent, transport, api.url, { wall, grace: 5, env: { NODE_OPTIONS: `--require ${lateServer}` } });
  await api.close();
  return { ...launched, requests: api.requests, stepsServed: api.stepsServed() };
}

function withStore<T>(use: (store: Store) => T): T {
  const store = new Store(join(home, 'store.sqlite'));
  try {
    return use(store);
  } finally {
    store.close();
  }
}

describe('real agent CLIs against scripted model APIs, jailed', { timeout: 600_000 }, () => {
  it('finds the agent CLIs scripts/setup.sh installed', () => {
    for (const cli of clis) expect(findExecutable(agentKind(cli.agent)), 'run scripts/setup.sh').toBeTruthy();
  });

  // Two launches at a time (vitest.config.ts): the HTTP ones mostly wait for their deadline, so they go first, and the
  // short stdio ones fill the slot beside the last of them.
  describe.concurrent('each CLI over each transport', () => {
    for (const transport of ['http', 'stdio'] as const) {
      for (const cli of clis) {
        // Over stdio the run ends when the model is done; over HTTP the model never answers its last request, so the deadline stops the agent.
        const end = transport === 'stdio' ? 'text' : 'hang';
        it(`${cli.agent} over ${transport}: only the a2rl tools offered, every one callable, built-ins refused, nothing of the operator's, ${end === 'text' ? 'exit 0' : 'TERM at the deadline'}`, async ({
          expect,
        }) => {
          const started = Date.now();
          const launched = await benchmark(cli.agent, transport, end, end === 'text' ? '3m' : '60s');
          expect(launched.code, launched.stderr).toBe(0);
          expect(launched.runs).toHaveLength(1);
          const run = launched.runs[0]!;
          expect(run.infrastructure_failure).toBeNull();
          if (end === 'text') expect(run).toMatchObject({ exit_code: 0, stopped_at_deadline: false });
          else {
            expect(run.stopped_at_deadline).toBe(true);
            // The same end reason as a stdio run stopped at its deadline (test/launch.test.ts).
            expect(withStore((store) => store.getRun(run.run_id)!.end_reason)).toBe('wall-clock budget exhausted');
            // The whole run is bounded by the wall clock, the wait for its server to end it (10 s at most) and the grace,
            // whatever the agent does on TERM.
            expect(Date.now() - started).toBeLessThan(60_000 + 10_000 + 5_000 + 60_000);
          }

          // Every request that offered tools offered exactly these, in every turn.
          const scripted = launched.requests.filter((request) => request.scripted);
          expect(scripted.length).toBeGreaterThanOrEqual(15);
          for (const request of scripted) expect([...request.tools].sort()).toEqual([...cli.offered].sort());
          // Codex, with no --model, drove the model the run records: its default, named by a2rl, its tools first-class.
          if (cli.agent === 'codex') for (const request of scripted) expect(request.body.model).toBe(driverModel(cli.agent));
          // The whole script was played: every step got its request.
          expect(launched.stepsServed).toBe(15);
          // Nothing of the operator's own instructions, settings or MCP servers reached the model.
          for (const request of launched.requests) expect(request.text).not.toContain(decoy);

          const workDir = join(home, 'runs', run.run_id, 'agent', 'work');
          // The built-in shell and file tools were refused: nothing they would have made exists.
          expect(existsSync(join(workDir, 'pwned-by-shell'))).toBe(false);
          expect(existsSync(join(workDir, 'pwned-by-write'))).toBe(false);
          withStore((store) => {
            const called = store.listEvents(run.run_id, 'tool').map((event) => ({ name: event.name, data: JSON.parse(event.data) }));
            // Every a2rl tool reached the server, the six that write too.
            expect([...new Set(called.map((call) => call.name))].sort()).toEqual(toolNames);
            for (const name of ['write_file', 'exec', 'run_training', 'cancel_job', 'launch_rollouts', 'submit_artifact']) {
              const call = called.find((c) => c.name === name)!;
              expect(call.data.error, `${name}: ${JSON.stringify(call.data)}`).toBeUndefined();
            }
            expect(store.listSubmissions(run.run_id)).toHaveLength(1);
            const row = store.getRun(run.run_id)!;
            expect(row).toMatchObject({
              agent: cli.agent,
              driver_model: driverModel(cli.agent),
              state: 'ended',
              infrastructure_failure: null,
            });
          });
          // What the agent spent, read from the transcript it wrote: over stdio, the tokens the model API reported, summed
          // (no dollars: nobody prices "scripted-model"); a run stopped before the CLI wrote its totals says "unknown", never 0.
          const usage = withStore((store) => runUsage(store, run.run_id));
          // OpenCode and Qwen Code leave their side requests (a session title, checks offering no tools) out of their
          // transcripts: theirs count the tool-offering requests only, a lower bound of what the run spent.
          const counted = ['opencode', 'qwen-code'].includes(cli.agent) ? launched.requests.filter((r) => r.scripted) : launched.requests;
          const answered = counted.flatMap((request) => (request.usage ? [request.usage] : []));
          const sum = (key: keyof (typeof answered)[number]) => answered.reduce((total, usage) => total + usage[key], 0);
          expect(usage).toMatchObject({ agent: cli.agent, model: expect.any(String), cost_usd: 'unknown', price_table: null });
          // Each a2rl tool once, at least (Codex leaves the built-ins it refused out of its JSON).
          expect(usage.tool_calls).toBeGreaterThanOrEqual(toolNames.length);
          if (end === 'text') expect(usage).toMatchObject({ input_tokens: sum('input'), output_tokens: sum('output') });
          else expect(usage.input_tokens === 'unknown' || usage.input_tokens === sum('input')).toBe(true);
          if (transport === 'stdio') {
            // The server started 5 s late, and the agent still had its tools from its first request on.
            const listed = withStore((store) => store.listEvents(run.run_id, 'session').find((event) => event.name === 'tools_listed')!);
            const created = withStore((store) => store.getRun(run.run_id)!.created_at);
            expect(listed.at - created).toBeGreaterThanOrEqual(5_000);
          }
        });
      }
    }
  });

  // Each a2rl run makes two runs (the retry) of 50 s of wall clock: time to list the tools first even on a loaded host,
  // with the five CLIs, which then mostly wait, started at once (not ten: the 401 and 503 cases one after the other).
  describe('a model API down for the whole run', () => {
    for (const status of [401, 503] as const) {
      it(`each CLI, its model API answering ${status}: an infrastructure failure with the error as its reason, retried once, off the leaderboard, exit 1`, async () => {
        const api = await startFailingModelApi(status);
        const launches = await Promise.all(clis.map((cli) => launchAgent(cli.agent, 'stdio', api.url, { wall: '50s', grace: 2 })));
        await api.close();
        expect(api.refused()).toBeGreaterThan(0);
        for (const [index, launched] of launches.entries()) {
          const agent = clis[index]!.agent;
          expect(launched.code, `${agent}: ${launched.stderr}`).toBe(1);
          expect(launched.runs, agent).toHaveLength(2);
          const [first, retry] = launched.runs as [LaunchedRun, LaunchedRun];
          expect(retry.retry_of, agent).toBe(first.run_id);
          // The API's status or its message; Qwen Code retries a 503 without a trace in its transcript or on stderr.
          const error = status === 401 ? 'invalid x-api-key' : 'the model is overloaded';
          const reason =
            agent === 'qwen-code' && status === 503
              ? /^the model never answered; the agent /
              : new RegExp(`^the model never answered \\(last error: .*(\\b${status}\\b|${error})`);
          for (const run of launched.runs) expect(run.infrastructure_failure, agent).toMatch(reason);
          expect(launched.stderr).toContain(`run ${retry.run_id}: infrastructure failure, not counted: the model never answered`);
          withStore((store) => {
            for (const run of launched.runs) {
              // The agent had its tools; its model is what failed.
              expect(store.hasEvent(run.run_id, 'session', 'tools_listed'), agent).toBe(true);
              expect(store.getRun(run.run_id)!.infrastructure_failure).toBe(run.infrastructure_failure);
            }
            const results = runResults(store).filter((result) => launched.runs.some((run) => run.run_id === result.run_id));
            expect(results.map((result) => result.infrastructure_failure)).toEqual(launched.runs.map((run) => run.infrastructure_failure));
            // Off the leaderboard's results, and shown there as failures: a row of no run.
            expect(buildLeaderboard(results)).toEqual([
              expect.objectContaining({ runs: 0, mean: null, infrastructure_failures: launched.runs.length }),
            ]);
          });
        }
      });
    }
  });

  describe.concurrent('a2rl agent-config, used as written', () => {
    let server: ChildProcess | undefined;
    let mcpUrl = '';
    beforeAll(async () => {
      server = spawn(process.execPath, [cliEntry, '--home', home, 'serve', '--http', '--port', '0'], {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      mcpUrl = await new Promise<string>((resolve) => {
        let stderr = '';
        server!.stderr!.on('data', (chunk: Buffer) => {
          stderr += chunk;
          const match = /listening on (http:\/\/\S+)/.exec(stderr);
          if (match) resolve(`${match[1]}/mcp`);
        });
      });
    });
    afterAll(() => void server?.kill('SIGTERM'));

    for (const transport of ['stdio', 'http'] as const) {
      for (const cli of clis) {
        it(`${cli.agent} over ${transport}: exactly the a2rl tools, nothing of the operator's HOME`, async ({ expect }) => {
          const label = `manual-${cli.agent}-${transport}`;
          const where = transport === 'stdio' ? ['--task', 'micro-gsm8k', '--label', label] : ['--transport', 'http', '--url', mcpUrl];
          const config = execFileSync(
            process.execPath,
            [cliEntry, '--home', home, 'agent-config', cli.agent, ...where, ...modelArgs(cli.agent)],
            {
              encoding: 'utf8',
            },
          );
          // The CLI a2rl run would start, by its absolute path: the script runs where it is not on PATH.
          expect(config).toContain(findExecutable(agentKind(cli.agent))!);
          const created =
            transport === 'http'
              ? (JSON.parse(
                  execFileSync(process.execPath, [cliEntry, '--home', home, 'runs', 'create', '--task', 'micro-gsm8k', '--json'], {
                    encoding: 'utf8',
                  }),
                ) as { run_id: string; token: string })
              : undefined;
          const api = await startModelApi([{ call: [{ tool: 'read_instructions' }] }, { text: 'Done.' }]);
          const script = join(tempDir('agents-manual'), 'a2rl-agent.sh');
          writeFileSync(script, config);
          const extraArgs = cli.agent === 'codex' ? codexProvider(api.url) : [];
          const child = spawn('sh', [script, ...extraArgs], {
            env: {
              PATH: process.env.PATH,
              HOME: operatorHome,
              ...modelApiEnv(api.url),
              A2RL_PROMPT: 'Work on the a2rl task.',
              ...(created ? { A2RL_RUN_TOKEN: created.token } : {}),
            },
            stdio: ['ignore', 'ignore', 'pipe'],
            timeout: 180_000,
          });
          let stderr = '';
          child.stderr.on('data', (chunk: Buffer) => (stderr += chunk));
          const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
          await api.close();
          expect(code, stderr).toBe(0);
          expect(api.scripted().length).toBeGreaterThanOrEqual(2);
          for (const request of api.scripted()) expect([...request.tools].sort()).toEqual([...cli.offered].sort());
          for (const request of api.requests) expect(request.text).not.toContain(decoy);
          withStore((store) => {
            const runId = created?.run_id ?? store.listRuns().find((run) => run.label === label)!.id;
            expect(store.listEvents(runId, 'tool').map((event) => event.name)).toEqual(['read_instructions']);
          });
        });
      }
    }
  });

  it("a client's health check (claude mcp list) leaves a run out of the results", () => {
    const checkHome = tempDir('agents-health');
    const claude = findExecutable(agentKind('claude-code'))!;
    const env = { ...process.env, HOME: checkHome };
    execFileSync(
      claude,
      ['mcp', 'add', '-s', 'user', 'a2rl', '--', process.execPath, cliEntry, '--home', home, 'serve', '--task', 'micro-gsm8k'],
      {
        env,
        cwd: checkHome,
        encoding: 'utf8',
      },
    );
    const before = withStore((store) => store.listRuns().length);
    const listed = execFileSync(claude, ['mcp', 'list'], { env, cwd: checkHome, encoding: 'utf8', timeout: 120_000 });
    expect(listed).toMatch(/a2rl.*Connected/);
    withStore((store) => {
      const runs = store.listRuns();
      expect(runs.length).toBe(before + 1);
      const check = runs.at(-1)!;
      expect(check.state).toBe('ended');
      expect(store.listEvents(check.id, 'tool')).toEqual([]);
      expect(runResults(store).map((result) => result.run_id)).not.toContain(check.id);
    });
  });
});
