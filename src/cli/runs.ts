import { type Command } from 'commander';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Engine } from '../core/engine.js';
import { formatReplay, runToReplay } from '../launch/replay-from-run.js';
import { issueRunToken, revokeRun } from '../mcp/tokens.js';
import { type RunRow, Store } from '../store/store.js';
import { A2rlError } from '../util/errors.js';
import { endedWorkspace, workspaceStillRead } from './gc.js';
import {
  addJudgeOptions,
  addSandboxOptions,
  backendSettings,
  budgetOption,
  type CliContext,
  judgeConfig,
  type JudgeOptions,
  type SandboxOptions,
  taskOption,
  wholeNumberOption,
} from './options.js';

/** `a2rl runs create|revoke|clean|list|to-replay`; returns the group, for the report commands that join it. */
export function addRunsCommands(program: Command, { home }: CliContext): Command {
  const runs = program.command('runs').description('create, list and revoke the runs that serve --http serves to remote agents');

  addJudgeOptions(
    addSandboxOptions(
      runs
        .command('create')
        .description('create a run for a remote agent; prints its id, its token (shown once) and client configuration')
        .requiredOption('--task <id>', 'task to run, e.g. micro-gsm8k', taskOption)
        .option('--budget <spec>', 'limits over the task default, e.g. wall=30m,compute=20m,submissions=10,episodes=2000', budgetOption)
        .option('--label <name>', 'who is being benchmarked, e.g. claude-code-opus')
        .option('--base-model <id>', "a full-tier task's base model, a Hugging Face id (default: the task's), prepared by a2rl prepare")
        .option('--url <url>', 'the MCP endpoint clients will use', 'http://127.0.0.1:8700/mcp')
        .option('--json', 'print {run_id, token, url} as JSON only'),
    ),
    'judge of judge-graded tasks; the same as serve --http uses',
  ).action(
    async (
      options: { task: string; budget?: string; label?: string; baseModel?: string; url: string; json?: boolean } & SandboxOptions &
        JudgeOptions,
    ) => {
      const engine = await Engine.open({
        home: home(),
        judge: judgeConfig(options),
        recover: false,
        sandbox: options.sandbox,
        backendSettings: backendSettings(options),
      });
      try {
        const run = await engine.prepareRun({
          taskId: options.task,
          budget: options.budget,
          label: options.label,
          baseModel: options.baseModel,
        });
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
    .command('clean [run-id]')
    .description("free ended runs' workspaces (a2rl gc frees them and more); the runs' records, logs, snapshots and submissions stay")
    .option('--ended', 'every ended run whose contamination check is recorded')
    .action(async (runId: string | undefined, options: { ended?: boolean }) => {
      if ((runId === undefined) === !options.ended) {
        throw new A2rlError('INVALID_INPUT', 'Name one run (a2rl runs clean RUN_ID) or give --ended for every ended run, not both.');
      }
      const store = new Store(join(home(), 'store.sqlite'));
      try {
        const chosen = runId === undefined ? store.listRuns().filter((run) => run.state === 'ended') : [endedRun(store, runId)];
        let freed = 0;
        for (const run of chosen) {
          const why = workspaceStillRead(store, run);
          if (why) {
            if (runId === undefined) continue;
            throw new A2rlError('CONFLICT', `Run ${run.id} keeps its workspace: ${why}, then clean.`);
          }
          const workspace = await endedWorkspace(run);
          if (!workspace) continue;
          await workspace.free();
          process.stdout.write(`${run.id}\tfreed ${Math.ceil(workspace.bytes / 2 ** 20)} MiB\n`);
          freed += workspace.bytes;
        }
        process.stdout.write(`freed ${Math.ceil(freed / 2 ** 20)} MiB\n`);
      } finally {
        store.close();
      }
    });

  runs
    .command('list')
    .description('list the newest runs, newest first: id, task, label, transport and state')
    .option('--limit <n>', 'how many of the newest runs to list', wholeNumberOption, 50)
    .option('--all', 'list every run')
    .action((options: { limit: number; all?: boolean }) => {
      const store = new Store(join(home(), 'store.sqlite'));
      try {
        // One query (runs and tokens joined) down the creation index, read a row at a time and written 64 KiB at a time.
        let chunk = '';
        let listed = 0;
        for (const run of store.iterateRuns(options.all ? undefined : options.limit)) {
          listed++;
          const state = run.state === 'ended' ? `ended (${run.end_reason})` : 'active';
          chunk += `${run.id}\t${run.task_id}\t${run.label ?? '-'}\t${run.token}\t${state}\n`;
          if (chunk.length > 1 << 16) {
            process.stdout.write(chunk);
            chunk = '';
          }
        }
        process.stdout.write(chunk);
        const total = options.all || listed < options.limit ? listed : store.countRuns();
        if (total > listed) process.stderr.write(`a2rl: the newest ${listed} of ${total} runs; --limit <n> or --all lists more\n`);
      } finally {
        store.close();
      }
    });

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
  return runs;
}

/** An ended run, for `runs clean`: an active run's workspace is in use. */
function endedRun(store: Store, runId: string): RunRow {
  const run = store.getRun(runId);
  if (!run) throw new A2rlError('NOT_FOUND', `No run "${runId}" in this home; a2rl runs list shows them.`);
  if (run.state !== 'ended')
    throw new A2rlError('CONFLICT', `Run ${runId} is active and uses its workspace; end it first (a2rl runs revoke ${runId}).`);
  return run;
}

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
  default_tools_approval_mode = "approve"

Any MCP client (mcpServers JSON; clients that only speak HTTP+SSE use ${sseUrl}):
  ${JSON.stringify({ mcpServers: { a2rl: { type: 'http', url, headers: { Authorization: `Bearer ${token}` } } } })}
`;
}
