import { type Command, InvalidArgumentError, Option } from 'commander';
import { cpus } from 'node:os';
import { Engine } from '../core/engine.js';
import { agentKind, findExecutable } from '../launch/agents.js';
import { checkAgentEnvName } from '../launch/environment.js';
import { jailedAgentPaths, launchRuns, type LaunchOptions } from '../launch/launcher.js';
import { createLogger } from '../util/logger.js';
import { startProgress } from '../util/progress.js';
import {
  addJudgeOptions,
  addSandboxOptions,
  addSearchOptions,
  backendSettings,
  sandboxArgs,
  type SandboxOptions,
  searchArgs,
  type SearchOptions,
  budgetOption,
  gpusOption,
  type CliContext,
  idleSecondsOption,
  judgeArgs,
  judgeConfig,
  type JudgeOptions,
  taskOption,
  wholeNumberOption,
} from './options.js';
import { formatSummaryTable } from './summary-table.js';

const collect = (value: string, previous: string[]) => [...previous, value];

const collectAgentEnv = (value: string, previous: string[]) => {
  try {
    return [...previous, checkAgentEnvName(value)];
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
};

/** `a2rl run`: benchmark an agent CLI as it ships. */
export function addRunCommand(program: Command, { home }: CliContext): void {
  addJudgeOptions(
    addSandboxOptions(addSearchOptions(program.command('run')))
      .description(
        'benchmark an agent as it ships: create a run, give the agent an MCP configuration naming only this server and the ' +
          "task prompt, start it in a fresh folder, stop it at the run's wall clock, record it with the run",
      )
      .requiredOption(
        '--agent <agent>',
        "claude-code, codex, gemini-cli, opencode, qwen-code, openhands (not yet run against the real CLI), replay:FILE or command:'…' (reads $A2RL_MCP_CONFIG, $A2RL_PROMPT)",
      )
      .requiredOption('--task <id>', 'task to run, e.g. micro-gsm8k', taskOption)
      .option('--base-model <id>', "a full-tier task's base model, a Hugging Face id (default: the task's), prepared by a2rl prepare")
      .option('--model <name>', "the agent's driver model, passed to it (--model) and recorded")
      .option('--gpus <list>', "host GPU indices the runs' servers may give jobs and gradings, e.g. 0,1 (as serve --gpus)", gpusOption)
      .option('--budget <spec>', 'limits over the task default, e.g. wall=30m,compute=20m', budgetOption)
      .option('--label <name>', 'label of the runs (default: the agent and model)')
      .option('--repeats <n>', 'independent runs to make', wholeNumberOption, 1)
      .option('--parallel <n>', `runs at once (at most the CPU count, ${cpus().length}, except on slurm)`, wholeNumberOption, 1)
      .addOption(
        new Option(
          '--transport <kind>',
          'stdio: the agent starts the server; http: it connects to a loopback serve --http with the run token',
        )
          .choices(['stdio', 'http'])
          .default('stdio'),
      )
      .option(
        '--agent-arg <arg>',
        "an argument for the agent CLI, after a2rl's own (repeat it; --agent-arg=-c for a leading dash), e.g. a model provider",
        collect,
        [],
      )
      .option(
        '--agent-bind <path>',
        "a host path the agent needs read-only in its jail (a command agent's own code); repeat it",
        collect,
        [],
      )
      .option(
        '--agent-env <name>',
        "a variable of this environment the agent gets beside PATH, locale, terminal and its provider's (ANTHROPIC_*, OPENAI_*, GEMINI_*/GOOGLE_*; OpenCode and Qwen Code: OPENAI_*, OpenCode also ANTHROPIC_*), e.g. HTTPS_PROXY or AWS_*; repeat it; never A2RL_*",
        collectAgentEnv,
        [],
      )
      .option('--grace <seconds>', "between TERM at the wall-clock deadline and KILL of the agent's process group", idleSecondsOption, 15)
      .option('--json', 'print the results as JSON'),
  ).action(
    async (
      options: Omit<LaunchOptions, 'graceSeconds' | 'serveArgs' | 'onLine' | 'agentArgs' | 'agentBinds' | 'agentEnv'> & {
        grace: number;
        json?: boolean;
        agentArg: string[];
        agentBind: string[];
        agentEnv: string[];
        gpus?: number[];
      } & JudgeOptions &
        SandboxOptions &
        SearchOptions,
    ) => {
      // A missing or unknown agent, or a jail that would show what agents never see, is refused before anything is opened or created.
      jailedAgentPaths(findExecutable(agentKind(options.agent)), options.agentBind, home());
      const engine = await Engine.open({
        home: home(),
        judge: judgeConfig(options),
        recover: false,
        logger: createLogger().logger,
        sandbox: options.sandbox,
        backendSettings: backendSettings(options),
      });
      // The agents may work for the whole wall clock in silence: the time so far on stderr (a counting line on a
      // terminal, else a line every few seconds), the launcher's own lines above it.
      const progress = startProgress(`a2rl run ${options.task}`, undefined);
      try {
        const results = await launchRuns(engine, {
          ...options,
          graceSeconds: options.grace,
          agentArgs: options.agentArg,
          agentBinds: options.agentBind,
          agentEnv: options.agentEnv,
          serveArgs: [
            ...judgeArgs(options),
            ...sandboxArgs(options),
            ...searchArgs(options),
            ...(options.gpus ? ['--gpus', options.gpus.join(',')] : []),
          ],
          onLine: (line) => progress.print(`a2rl run: ${line}`),
        });
        progress.stop();
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
        // A repeat whose retry failed too is no result: say so, and exit non-zero.
        const failed = results.filter((r) => r.infrastructure_failure !== null && !results.some((other) => other.retry_of === r.run_id));
        for (const run of failed)
          process.stderr.write(`a2rl run: run ${run.run_id}: infrastructure failure, not counted: ${run.infrastructure_failure}\n`);
        if (failed.length > 0) process.exitCode = 1;
      } finally {
        progress.stop();
        await engine.close();
      }
    },
  );
}
