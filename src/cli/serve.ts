import { type Command, Option } from 'commander';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { defaultCallsPerSecond, Engine } from '../core/engine.js';
import { execSlotWaitMs, maxConcurrentExecs } from '../core/run.js';
import { defaultLogCap } from '../jobs/capped-log.js';
import { serveHttp } from '../mcp/transports/http/serve.js';
import { serveStdio } from '../mcp/transports/stdio.js';
import { A2rlError } from '../util/errors.js';
import { createView } from '../view/worker-proxy.js';
import { viewTokenBeside } from '../view/token.js';
import { createLogger } from '../util/logger.js';
import { endWithParent } from './end-with-parent.js';
import {
  addJudgeOptions,
  addSearchOptions,
  budgetOption,
  type CliContext,
  diskQuotaOption,
  gpusOption,
  idleSecondsOption,
  judgeConfig,
  type JudgeOptions,
  maxJobsOption,
  portOption,
  type SandboxOptions,
  addSandboxOptions,
  type SearchOptions,
  searchSettings,
  backendSettings,
  taskOption,
  wholeNumberOption,
} from './options.js';

interface ServeOptions extends JudgeOptions, SandboxOptions, SearchOptions {
  gpus?: number[];
  task?: string;
  run?: string;
  budget?: string;
  label?: string;
  baseModel?: string;
  http?: boolean;
  host: string;
  port: number;
  allowHost: string[];
  adminTokenEnv: string;
  maxJobs?: number;
  maxExecs?: number;
  sessionIdle: number;
  diskQuota?: number;
  storage?: 'kernel' | 'walk';
  overcommitDisk?: boolean;
  maxLog: number;
  callsPerSecond: number;
  detach?: boolean;
}

/**
 * The default server-wide exec cap, per CPU: an exec is mostly a short look (cat, ls, a few steps) that leaves its core
 * idle, so several share one; the cap bounds how many sandboxes (each with a job's memory) bursts of many runs start at once.
 */
const execsPerCpu = 4;

/** `a2rl serve`: one run over stdio, a run a2rl run made, or every run of the store over HTTP. */
export function addServeCommand(program: Command, { home }: CliContext): void {
  addJudgeOptions(
    addSandboxOptions(addSearchOptions(program.command('serve')))
      .description(
        'serve one benchmark run over MCP stdio (stdout is the protocol; logs go to stderr and the run folder), ' +
          'or with --http every run made by `a2rl runs create` over MCP Streamable HTTP and HTTP+SSE',
      )
      .option('--task <id>', 'stdio: task to run, e.g. micro-gsm8k', taskOption)
      .option('--run <id>', 'stdio: serve a run that a2rl run prepared for the agent it started (instead of --task)')
      .option(
        '--budget <spec>',
        'stdio: limits over the task default, e.g. wall=30m,compute=20m,submissions=10,episodes=2000',
        budgetOption,
      )
      .option('--label <name>', 'stdio: who is being benchmarked, e.g. claude-code-opus')
      .option(
        '--base-model <id>',
        "stdio: a full-tier task's base model, a Hugging Face id (default: the task's), prepared by a2rl prepare",
      )
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
        `HTTP: most training and rollout jobs of all runs at once; more are refused until one ends (default: the CPU count, ${cpus().length}; none on slurm, whose jobs run on the cluster)`,
        maxJobsOption,
      )
      .option(
        '--max-execs <n>',
        `HTTP: most exec commands of all runs at once (each run may have ${maxConcurrentExecs}); one more waits up to ${execSlotWaitMs / 1000} s for one to end, then is refused (default: ${execsPerCpu} per CPU, ${execsPerCpu * cpus().length}; none on slurm)`,
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
        'most disk each run may use (workspace, job logs, snapshots); over it, training and rollout jobs stop and writes are refused (default 4096)',
        diskQuotaOption,
      )
      .addOption(
        new Option(
          '--storage <how>',
          "what holds each new run to its disk quota: kernel (its workspace an ext4 image of its own, where the host can loop-mount; the default) or walk (the server's disk walk)",
        ).choices(['kernel', 'walk']),
      )
      .option(
        '--overcommit-disk',
        "make a new run's workspace image even where the home's free space cannot cover its --disk-quota plus what the live runs' images may still grow (logged as a warning; without it such a run is refused)",
      )
      .option(
        '--max-log <MiB>',
        "most of a job's output its log keeps: the first and the last half of it, with a line saying how much was dropped between",
        wholeNumberOption,
        (defaultLogCap.headBytes + defaultLogCap.tailBytes) / 2 ** 20,
      )
      .option(
        '--calls-per-second <n>',
        'most tool calls each run may make per second, sustained (bursts of twice that); more get RATE_LIMITED',
        wholeNumberOption,
        defaultCallsPerSecond,
      )
      .option('--gpus <list>', 'host GPU indices jobs may be given, e.g. 0,1 (with two or more, the last is kept for grading)', gpusOption)
      .option('--detach', 'keep serving after the process that started this one ends (by default the server stops with it)'),
  ).action(async (options: ServeOptions) => {
    const mode = serveMode(options);
    if (!options.detach) endWithParent();
    const judge = judgeConfig(options);
    const log = createLogger();
    // Read before the engine starts: a view token that is the admin token is refused with nothing to undo.
    const viewToken = mode === 'http' ? viewTokenBeside(home(), process.env[options.adminTokenEnv] || undefined) : undefined;
    const engine = await Engine.open({
      home: home(),
      logger: log.logger,
      judge,
      // Jobs on slurm run on the cluster's nodes, which it schedules: this host's cores are no limit there.
      maxJobs: mode === 'http' ? (options.maxJobs ?? (options.sandbox === 'slurm' ? undefined : cpus().length)) : undefined,
      maxExecs: mode === 'http' ? (options.maxExecs ?? (options.sandbox === 'slurm' ? undefined : execsPerCpu * cpus().length)) : undefined,
      diskQuotaBytes: options.diskQuota,
      storage: options.storage,
      overcommitDisk: options.overcommitDisk,
      logCap: { headBytes: (options.maxLog * 2 ** 20) / 2, tailBytes: (options.maxLog * 2 ** 20) / 2 },
      callsPerSecond: options.callsPerSecond,
      sandbox: options.sandbox,
      backendSettings: backendSettings(options),
      gpus: options.gpus,
      search: searchSettings(options),
    });
    if (mode === 'http') {
      log.addFile(join(home(), 'server.log'));
      await serveHttp(engine, {
        host: options.host,
        port: options.port,
        allowHosts: options.allowHost,
        adminToken: process.env[options.adminTokenEnv] || undefined,
        sessionIdleMs: options.sessionIdle * 1000,
        view: (serverSocket) =>
          createView({
            store: engine.store,
            home: home(),
            token: viewToken!,
            diskQuotaBytes: engine.services.limits.diskQuotaBytes,
            hosts: { listen: options.host, allow: options.allowHost },
            serverSocket,
          }),
      });
      return;
    }
    let run;
    try {
      run =
        mode === 'launched'
          ? await engine.serveLaunchedRun(options.run!)
          : await engine.createRun({ taskId: options.task!, budget: options.budget, label: options.label, baseModel: options.baseModel });
    } catch (error) {
      await engine.close();
      throw error;
    }
    log.addFile(join(run.dir, 'server.log'));
    log.logger.info({ run: run.id, dir: run.dir, judge: engine.grader.judge.id }, 'run ready');
    await serveStdio(engine, run);
  });
}

type ServeMode = 'task' | 'launched' | 'http';

/** The flags that apply only to some modes, with the modes they apply to and why. */
const modeOnlyFlags: { flag: string; option: keyof ServeOptions; modes: ServeMode[]; why: string }[] = [
  { flag: '--task', option: 'task', modes: ['task'], why: 'it names the task of a new stdio run' },
  { flag: '--budget', option: 'budget', modes: ['task'], why: 'a run keeps the budget it was made with' },
  { flag: '--label', option: 'label', modes: ['task'], why: 'a run keeps the label it was made with' },
  { flag: '--base-model', option: 'baseModel', modes: ['task'], why: 'a run keeps the base model it was made with' },
  { flag: '--max-jobs', option: 'maxJobs', modes: ['http'], why: 'it limits the jobs of all runs one server serves' },
  { flag: '--max-execs', option: 'maxExecs', modes: ['http'], why: 'it limits the exec commands of all runs one server serves' },
];

const modeFlag: Record<ServeMode, string> = { task: '--task', launched: '--run', http: '--http' };

const modeHelp: Record<ServeMode, string> = {
  task: 'serve --task ID serves one new run over stdio',
  launched: 'serve --run ID serves over stdio a run that a2rl run made',
  http: 'serve --http serves the runs of the store, each made with a2rl runs create --task ID [--budget ...] [--label ...]',
};

/** Which of the three ways to serve the flags ask for; a flag that does not apply to it is refused, saying what to do. */
function serveMode(options: ServeOptions): ServeMode {
  const chosen = [options.http && 'http', options.run !== undefined && 'launched', options.task !== undefined && 'task'].filter(
    (mode): mode is ServeMode => typeof mode === 'string',
  );
  const mode = chosen[0];
  if (mode === undefined) {
    throw new A2rlError(
      'INVALID_INPUT',
      'serve needs --task ID for a run over stdio, --run ID for a run a2rl run made, or --http to serve runs made with a2rl runs create.',
    );
  }
  if (chosen.length > 1) {
    throw new A2rlError('INVALID_INPUT', `${modeHelp[mode]}: give one of ${chosen.map((m) => modeFlag[m]).join(', ')}.`);
  }
  const misplaced = modeOnlyFlags.find(({ option, modes }) => options[option] !== undefined && !modes.includes(mode));
  if (misplaced) {
    const belongs = misplaced.modes.map((m) => `serve ${modeFlag[m]}`).join(' or ');
    throw new A2rlError(
      'INVALID_INPUT',
      `${misplaced.flag} is for ${belongs} only (${misplaced.why}); ${modeHelp[mode]}: drop ${misplaced.flag}, or use ${belongs}.`,
    );
  }
  return mode;
}
