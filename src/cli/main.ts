#!/usr/bin/env node
import { Command, InvalidArgumentError, Option } from 'commander';
import { cpus } from 'node:os';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Docker from 'dockerode';
import { createBackend, type SandboxName, sandboxNames } from '../../sandbox/registry.js';
import { cgroupsUnavailableReason } from '../../sandbox/cgroup.js';
import { parseBudget } from '../tasks/budget.js';
import { connectFromMcpConfig, connectHttp, connectStdio } from '../launch/client.js';
import { addReportCommands } from './reports.js';
import { formatSummaryTable, runDemo } from './demo.js';
import { Engine } from '../core/engine.js';
import type { JudgeConfig } from '../grading/judge/registry.js';
import { A2rlError, isA2rlError } from '../util/errors.js';
import { createLogger } from '../util/logger.js';
import { defaultHome } from '../util/paths.js';
import { agentKind, findExecutable, serverName } from '../launch/agents.js';
import { launchRuns, type LaunchOptions } from '../launch/launcher.js';
import { loadReplay, playReplay } from '../launch/replay.js';
import { serverVersion } from '../mcp/server.js';
import { parseGpuList } from '../jobs/gpu-allocator.js';
import { buildImage, type ImageName, imageNames } from '../../sandbox/images/build.js';
import { getTask, listTaskIds } from '../tasks/task.js';
import { Store } from '../store/store.js';
import { formatReplay, runToReplay } from '../launch/replay-from-run.js';
import { issueRunToken, revokeRun } from '../mcp/tokens.js';
import { serveHttp } from '../mcp/transports/http.js';
import { serveStdio } from '../mcp/transports/stdio.js';

const program = new Command()
  .name('a2rl')
  .description('a2rl-bench: benchmark AI agents on agentic RL post-training, over MCP')
  .version(serverVersion)
  .option('--home <dir>', 'where runs, submissions and the store live (default $A2RL_HOME or ~/.a2rl)');

const home = () => (program.opts().home as string | undefined) ?? defaultHome();

function taskOption(value: string): string {
  try {
    return getTask(value).id;
  } catch (error) {
    throw new InvalidArgumentError(isA2rlError(error) ? error.message : String(error));
  }
}

function budgetOption(value: string): string {
  try {
    parseBudget(value, { wallSeconds: 1, computeSeconds: 1, submissions: 1, rolloutEpisodes: 1 });
    return value;
  } catch (error) {
    throw new InvalidArgumentError(isA2rlError(error) ? error.message : String(error));
  }
}

interface JudgeOptions {
  judge: 'rubric' | 'llm';
  judgeUrl?: string;
  judgeModel?: string;
  judgeKeyEnv: string;
}

function judgeConfig(options: JudgeOptions): JudgeConfig {
  if (options.judge === 'rubric') return { kind: 'rubric' };
  if (!options.judgeUrl || !options.judgeModel) {
    throw new InvalidArgumentError(
      '--judge llm needs --judge-url (an OpenAI-compatible base URL, e.g. https://api.openai.com/v1) and --judge-model.',
    );
  }
  return { kind: 'llm', baseUrl: options.judgeUrl, model: options.judgeModel, apiKey: process.env[options.judgeKeyEnv] };
}

/** `--sandbox`, also set by $A2RL_SANDBOX: the one switch between backends, for serve and everything that serves runs. */
const sandboxOption = () =>
  new Option('--sandbox <backend>', 'sandbox backend of runs and grading (a2rl doctor shows which work here)')
    .choices(sandboxNames)
    .env('A2RL_SANDBOX')
    .default('bwrap');

function gpusOption(value: string): number[] {
  try {
    return parseGpuList(value);
  } catch (error) {
    throw new InvalidArgumentError(isA2rlError(error) ? error.message : String(error));
  }
}

function maxJobsOption(value: string): number {
  const jobs = Number(value);
  if (!Number.isInteger(jobs) || jobs < 1) throw new InvalidArgumentError('Give a whole number of jobs, at least 1.');
  return jobs;
}

function idleSecondsOption(value: string): number {
  const seconds = Number(value);
  if (!Number.isFinite(seconds) || seconds <= 0) throw new InvalidArgumentError('Give a number of seconds above 0, e.g. 1800.');
  return seconds;
}

function diskQuotaOption(value: string): number {
  const mib = Number(value);
  if (!Number.isInteger(mib) || mib < 1) throw new InvalidArgumentError('Give the quota as a whole number of MiB, at least 1, e.g. 4096.');
  return mib * 2 ** 20;
}

function wholeNumberOption(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('Give a whole number, at least 1.');
  return n;
}

function portOption(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new InvalidArgumentError('Give a port number from 0 to 65535 (0: any free port).');
  return port;
}

interface ServeOptions extends JudgeOptions {
  sandbox: SandboxName;
  gpus?: number[];
  task?: string;
  run?: string;
  budget?: string;
  label?: string;
  http?: boolean;
  host: string;
  port: number;
  allowHost: string[];
  adminTokenEnv: string;
  maxJobs?: number;
  sessionIdle: number;
  diskQuota?: number;
}

program
  .command('serve')
  .description(
    'serve one benchmark run over MCP stdio (stdout is the protocol; logs go to stderr and the run folder), ' +
      'or with --http every run made by `a2rl runs create` over MCP Streamable HTTP and HTTP+SSE',
  )
  .option('--task <id>', 'stdio: task to run, e.g. micro-gsm8k', taskOption)
  .option('--run <id>', 'stdio: serve a run that a2rl run prepared for the agent it started (instead of --task)')
  .option('--budget <spec>', 'stdio: limits over the task default, e.g. wall=30m,compute=20m,submissions=10,episodes=2000', budgetOption)
  .option('--label <name>', 'stdio: who is being benchmarked, e.g. claude-code-opus')
  .option('--http', 'serve runs over HTTP instead of one run over stdio')
  .option('--host <address>', 'HTTP: address to listen on; anything but loopback is reachable from other machines', '127.0.0.1')
  .option('--port <n>', 'HTTP: port to listen on (0: any free port)', portOption, 8700)
  .option(
    '--allow-host <name>',
    'HTTP: a further Host/Origin name clients may use (repeatable)',
    (v: string, all: string[]) => [...all, v],
    [],
  )
  .option('--admin-token-env <name>', 'HTTP: environment variable holding the admin token that enables POST /runs', 'A2RL_ADMIN_TOKEN')
  .option(
    '--max-jobs <n>',
    `HTTP: most training and rollout jobs of all runs at once; more are refused until one ends (default: the CPU count, ${cpus().length})`,
    maxJobsOption,
  )
  .option(
    '--session-idle <seconds>',
    'HTTP: close a Streamable HTTP session after this long without a request (its run goes on; the client reconnects)',
    idleSecondsOption,
    1800,
  )
  .option(
    '--disk-quota <MiB>',
    "most disk each run's workspace may use; over it, training and rollout jobs stop and writes are refused (default 4096)",
    diskQuotaOption,
  )
  .addOption(
    new Option('--judge <kind>', "judge of judge-graded tasks: the task's rubric or an LLM").choices(['rubric', 'llm']).default('rubric'),
  )
  .option('--judge-url <url>', 'OpenAI-compatible base URL for --judge llm, e.g. https://api.openai.com/v1')
  .option('--judge-model <name>', 'model name for --judge llm')
  .option('--judge-key-env <name>', 'environment variable holding the API key for --judge llm', 'A2RL_JUDGE_API_KEY')
  .addOption(sandboxOption())
  .option('--gpus <list>', 'host GPU indices jobs may be given, e.g. 0,1 (with two or more, the last is kept for grading)', gpusOption)
  .action(async (options: ServeOptions) => {
    const judge = judgeConfig(options);
    if (!options.http && options.maxJobs !== undefined) {
      throw new A2rlError(
        'INVALID_INPUT',
        '--max-jobs limits the jobs of all runs a serve --http process serves; a stdio run is limited per run only: drop --max-jobs or add --http.',
      );
    }
    if (options.http && (options.task || options.budget || options.label)) {
      throw new A2rlError(
        'INVALID_INPUT',
        'serve --http serves the runs of the store: create each with a2rl runs create --task ID [--budget ...] [--label ...], and drop --task, --budget and --label here.',
      );
    }
    if (options.run && (options.http || options.task || options.budget || options.label)) {
      throw new A2rlError(
        'INVALID_INPUT',
        'serve --run serves a run made by a2rl run over stdio, with the task, budget and label it was made with: drop --http, --task, --budget and --label.',
      );
    }
    if (!options.http && !options.task && !options.run) {
      throw new A2rlError(
        'INVALID_INPUT',
        'serve needs --task ID for a run over stdio, --run ID for a run a2rl run made, or --http to serve runs made with a2rl runs create.',
      );
    }
    const log = createLogger();
    const maxJobs = options.http ? (options.maxJobs ?? cpus().length) : undefined;
    const engine = await Engine.open({
      home: home(),
      logger: log.logger,
      judge,
      maxJobs,
      diskQuotaBytes: options.diskQuota,
      sandbox: options.sandbox,
      gpus: options.gpus,
    });
    if (options.http) {
      log.addFile(join(home(), 'server.log'));
      await serveHttp(engine, {
        host: options.host,
        port: options.port,
        allowHosts: options.allowHost,
        adminToken: process.env[options.adminTokenEnv] || undefined,
        sessionIdleMs: options.sessionIdle * 1000,
      });
      return;
    }
    let run;
    try {
      run = options.run
        ? await engine.serveLaunchedRun(options.run)
        : await engine.createRun({ taskId: options.task!, budget: options.budget, label: options.label });
    } catch (error) {
      await engine.close();
      throw error;
    }
    log.addFile(join(run.dir, 'server.log'));
    log.logger.info({ run: run.id, dir: run.dir, judge: engine.grader.judge.id }, 'run ready');
    await serveStdio(engine, run);
  });

const runs = program.command('runs').description('create, list and revoke the runs that serve --http serves to remote agents');

runs
  .command('create')
  .description('create a run for a remote agent; prints its id, its token (shown once) and client configuration')
  .requiredOption('--task <id>', 'task to run, e.g. micro-gsm8k', taskOption)
  .option('--budget <spec>', 'limits over the task default, e.g. wall=30m,compute=20m,submissions=10,episodes=2000', budgetOption)
  .option('--label <name>', 'who is being benchmarked, e.g. claude-code-opus')
  .option('--url <url>', 'the MCP endpoint clients will use', 'http://127.0.0.1:8700/mcp')
  .option('--json', 'print {run_id, token, url} as JSON only')
  .addOption(
    new Option('--judge <kind>', 'judge of judge-graded tasks; the same as serve --http uses').choices(['rubric', 'llm']).default('rubric'),
  )
  .option('--judge-url <url>', 'OpenAI-compatible base URL for --judge llm')
  .option('--judge-model <name>', 'model name for --judge llm')
  .option('--judge-key-env <name>', 'environment variable holding the API key for --judge llm', 'A2RL_JUDGE_API_KEY')
  .addOption(sandboxOption())
  .action(
    async (
      options: { task: string; budget?: string; label?: string; url: string; json?: boolean; sandbox: SandboxName } & JudgeOptions,
    ) => {
      const engine = await Engine.open({ home: home(), judge: judgeConfig(options), recover: false, sandbox: options.sandbox });
      try {
        const run = engine.prepareRun({ taskId: options.task, budget: options.budget, label: options.label });
        const token = issueRunToken(engine.store, run.id);
        engine.releaseRun(run.id);
        process.stdout.write(
          options.json ? `${JSON.stringify({ run_id: run.id, token, url: options.url })}\n` : clientSetup(run.id, token, options.url),
        );
      } finally {
        await engine.close();
      }
    },
  );

runs
  .command('revoke <run-id>')
  .description("revoke a run's token and end the run: its sessions are refused, its jobs stop")
  .action((runId: string) => {
    const store = new Store(join(home(), 'store.sqlite'));
    try {
      revokeRun(store, runId);
      process.stdout.write(`run ${runId} revoked and ended\n`);
    } finally {
      store.close();
    }
  });

runs
  .command('list')
  .description('list runs: id, task, label, state, transport and token')
  .action(() => {
    const store = new Store(join(home(), 'store.sqlite'));
    try {
      for (const run of store.listRuns()) {
        const token = store.getRunToken(run.id);
        const access = !token ? 'stdio' : token.revoked_at === null ? 'http' : 'http, revoked';
        const state = run.state === 'ended' ? `ended (${run.end_reason})` : 'active';
        process.stdout.write(`${run.id}\t${run.task_id}\t${run.label ?? '-'}\t${access}\t${state}\n`);
      }
    } finally {
      store.close();
    }
  });

addReportCommands(program, runs, home);

runs
  .command('to-replay <run-id>')
  .description("turn a recorded run (any agent's tool calls) into a replay that a2rl replay plays against a fresh server")
  .option('--out <file>', 'write the replay here instead of stdout')
  .action((runId: string, options: { out?: string }) => {
    const store = new Store(join(home(), 'store.sqlite'));
    try {
      const text = formatReplay(runToReplay(store, runId));
      if (options.out) writeFileSync(options.out, text);
      else process.stdout.write(text);
    } finally {
      store.close();
    }
  });

/** What an operator pastes into a client to connect it to the run. */
function clientSetup(runId: string, token: string, url: string): string {
  const sseUrl = url.replace(/\/mcp$/, '/sse');
  return `run ${runId}
token ${token}
(shown once: the store keeps only its hash; a2rl runs revoke ${runId} ends the run)

Claude Code:
  claude mcp add --transport http a2rl ${url} --header "Authorization: Bearer ${token}"

Codex CLI (~/.codex/config.toml; Codex reads the token from the environment: export A2RL_RUN_TOKEN=${token}):
  [mcp_servers.a2rl]
  url = "${url}"
  bearer_token_env_var = "A2RL_RUN_TOKEN"
  tool_timeout_sec = 120

Any MCP client (mcpServers JSON; clients that only speak HTTP+SSE use ${sseUrl}):
  ${JSON.stringify({ mcpServers: { a2rl: { type: 'http', url, headers: { Authorization: `Bearer ${token}` } } } })}
`;
}

program
  .command('demo')
  .description("run tasks' oracles end to end through the MCP server and print the results (default: every task)")
  .option('--task <id...>', 'tasks to run', (value: string, previous: string[] = []) => [...previous, taskOption(value)])
  .option('--budget <spec>', 'limits over each task default', budgetOption)
  .action(async (options: { task?: string[]; budget?: string }) => {
    const tasks = options.task ?? listTaskIds();
    const summaries = [];
    for (const task of tasks) summaries.push(await runDemo({ task, home: home(), budget: options.budget }));
    process.stdout.write(`${formatSummaryTable(summaries)}\n`);
    for (const s of summaries) process.stdout.write(`run ${s.run_id} (${s.task}): ${s.end_reason ?? s.state}\n`);
  });

program
  .command('replay <file>')
  .description(
    'play a scripted replay (JSONL of tool calls) through a real MCP client: against a fresh local run (--task), a run of a ' +
      'remote server (--url, --token) or the server of an mcpServers file (--mcp-config); exits 1 when an expectation fails',
  )
  .option('--task <id>', 'play against a fresh local run of this task', taskOption)
  .option('--budget <spec>', 'with --task: limits over the task default', budgetOption)
  .option('--label <name>', 'with --task: label of the run', 'replay')
  .option('--url <url>', 'play against a run of a2rl serve --http, e.g. http://127.0.0.1:8700/mcp (Streamable HTTP)')
  .option('--token <token>', 'with --url: the run token (default: $A2RL_RUN_TOKEN)')
  .option('--mcp-config <file>', 'play against the "a2rl" server of an mcpServers JSON file (what a2rl run writes)')
  .action(
    async (file: string, options: { task?: string; budget?: string; label: string; url?: string; token?: string; mcpConfig?: string }) => {
      const replay = loadReplay(file);
      const targets = [options.task, options.url, options.mcpConfig].filter((target) => target !== undefined);
      if (targets.length !== 1) {
        throw new A2rlError(
          'INVALID_INPUT',
          'replay plays against one server: give --task ID, or --url URL with --token, or --mcp-config FILE.',
        );
      }
      const token = options.token ?? process.env.A2RL_RUN_TOKEN;
      if (options.url && !token) {
        throw new A2rlError('INVALID_INPUT', '--url needs the run token: --token TOKEN, or A2RL_RUN_TOKEN in the environment.');
      }
      const client = options.task
        ? (
            await connectStdio({
              task: options.task,
              budget: options.budget,
              label: options.label,
              home: home(),
              stderr: 'ignore',
              clientName: 'a2rl-replay',
            })
          ).client
        : options.url
          ? await connectHttp(options.url, token!, 'a2rl-replay')
          : await connectFromMcpConfig(options.mcpConfig!, serverName, 'a2rl-replay');
      try {
        await playReplay(client, replay, {
          onResult: (outcome) =>
            process.stdout.write(
              `${JSON.stringify({ line: outcome.step.line, tool: outcome.step.tool, ok: !outcome.isError, calls: outcome.calls, duration_ms: outcome.durationMs })}\n`,
            ),
        });
      } finally {
        await client.close();
      }
    },
  );

program
  .command('run')
  .description(
    'benchmark an agent as it ships: create a run, give the agent an MCP configuration naming only this server and the ' +
      "task prompt, start it in a fresh folder, stop it at the run's wall clock, record it with the run",
  )
  .requiredOption('--agent <agent>', "claude-code, codex, gemini-cli, replay:FILE or command:'…' (reads $A2RL_MCP_CONFIG, $A2RL_PROMPT)")
  .requiredOption('--task <id>', 'task to run, e.g. micro-gsm8k', taskOption)
  .option('--model <name>', "the agent's driver model, passed to it (--model) and recorded")
  .option('--budget <spec>', 'limits over the task default, e.g. wall=30m,compute=20m', budgetOption)
  .option('--label <name>', 'label of the runs (default: the agent and model)')
  .option('--repeats <n>', 'independent runs to make', wholeNumberOption, 1)
  .option('--parallel <n>', `runs at once (at most the CPU count, ${cpus().length})`, wholeNumberOption, 1)
  .addOption(
    new Option('--transport <kind>', 'stdio: the agent starts the server; http: it connects to a loopback serve --http with the run token')
      .choices(['stdio', 'http'])
      .default('stdio'),
  )
  .option('--grace <seconds>', "between TERM at the wall-clock deadline and KILL of the agent's process group", idleSecondsOption, 15)
  .option('--json', 'print the results as JSON')
  .addOption(new Option('--judge <kind>', 'judge of judge-graded tasks').choices(['rubric', 'llm']).default('rubric'))
  .option('--judge-url <url>', 'OpenAI-compatible base URL for --judge llm')
  .option('--judge-model <name>', 'model name for --judge llm')
  .option('--judge-key-env <name>', 'environment variable holding the API key for --judge llm', 'A2RL_JUDGE_API_KEY')
  .action(
    async (options: Omit<LaunchOptions, 'graceSeconds' | 'judgeArgs' | 'onLine'> & { grace: number; json?: boolean } & JudgeOptions) => {
      const judgeArgs = ['--judge', options.judge, '--judge-key-env', options.judgeKeyEnv];
      if (options.judgeUrl) judgeArgs.push('--judge-url', options.judgeUrl);
      if (options.judgeModel) judgeArgs.push('--judge-model', options.judgeModel);
      // A missing or unknown agent is refused before anything is opened or created.
      findExecutable(agentKind(options.agent));
      const engine = await Engine.open({ home: home(), judge: judgeConfig(options), recover: false, logger: createLogger().logger });
      try {
        const results = await launchRuns(engine, {
          ...options,
          graceSeconds: options.grace,
          judgeArgs,
          onLine: (line) => process.stderr.write(`a2rl run: ${line}\n`),
        });
        process.stdout.write(
          options.json
            ? `${JSON.stringify(results, null, 2)}\n`
            : `${formatSummaryTable(results.map((r) => r.summary))}\n${results
                .map(
                  (r) =>
                    `run ${r.run_id}: ${r.agent} ${r.agent_version ?? ''} exit ${r.signal ?? r.exit_code}${r.stopped_at_deadline ? ' (stopped at the deadline)' : ''}`,
                )
                .join('\n')}\n`,
        );
      } finally {
        await engine.close();
      }
    },
  );

program
  .command('tasks')
  .description('list the tasks')
  .action(() => {
    for (const id of listTaskIds()) {
      const task = getTask(id);
      process.stdout.write(`${task.id}\tlevel ${task.level}\t${task.tier}\t${task.title}\n`);
    }
  });

program
  .command('doctor')
  .description('report which sandbox backends work on this host, and why the others do not')
  .action(async () => {
    let usable = 0;
    for (const name of sandboxNames) {
      const reason = await createBackend(name, `doctor-${process.pid}`).unavailableReason();
      if (!reason) usable++;
      process.stdout.write(`${name}\t${reason ? `unavailable: ${reason}` : 'works'}\n`);
    }
    const noCgroups = cgroupsUnavailableReason();
    process.stdout.write(
      `limits\t${noCgroups ? `none per job: ${noCgroups}; compute is charged as wall time` : 'per job (cgroup v1): memory, CPU, pids, CPU-seconds'}\n`,
    );
    if (usable === 0) process.exitCode = 1;
  });

program
  .command('images')
  .description('sandbox images of the docker backend (sandbox/images/)')
  .command('build <name>')
  .description('build an image into the local Docker engine: micro (no registry needed: debootstrap, then its Dockerfile) or gpu')
  .option('--force', 'rebuild even when the image exists')
  .action(async (name: string, options: { force?: boolean }) => {
    if (!imageNames.includes(name as ImageName)) {
      throw new A2rlError('INVALID_INPUT', `No image "${name}"; build one of: ${imageNames.join(', ')}.`);
    }
    await buildImage(new Docker(), name as ImageName, { force: options.force, log: (line) => process.stderr.write(`${line}\n`) });
  });

program.parseAsync().catch((error: unknown) => {
  process.stderr.write(
    `a2rl: ${isA2rlError(error) ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exitCode = 1;
});
