#!/usr/bin/env node
import { Command, InvalidArgumentError, Option } from 'commander';
import { join } from 'node:path';
import { parseBudget } from './budget.js';
import { connectStdio } from './client.js';
import { formatSummaryTable, runDemo } from './demo.js';
import { Engine, type JudgeConfig } from './engine.js';
import { isA2rlError } from './errors.js';
import { createLogger } from './logger.js';
import { defaultHome } from './paths.js';
import { loadReplay, playReplay } from './replay.js';
import { serverVersion } from './server.js';
import { getTask, listTaskIds } from './tasks.js';
import { serveStdio } from './transports/stdio.js';

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

program
  .command('serve')
  .description('serve one benchmark run over MCP stdio (stdout is the protocol; logs go to stderr and the run folder)')
  .requiredOption('--task <id>', 'task to run, e.g. micro-gsm8k', taskOption)
  .option('--budget <spec>', 'limits over the task default, e.g. wall=30m,compute=20m,submissions=10,episodes=2000', budgetOption)
  .option('--label <name>', 'who is being benchmarked, e.g. claude-code-opus')
  .addOption(
    new Option('--judge <kind>', "judge of judge-graded tasks: the task's rubric or an LLM").choices(['rubric', 'llm']).default('rubric'),
  )
  .option('--judge-url <url>', 'OpenAI-compatible base URL for --judge llm, e.g. https://api.openai.com/v1')
  .option('--judge-model <name>', 'model name for --judge llm')
  .option('--judge-key-env <name>', 'environment variable holding the API key for --judge llm', 'A2RL_JUDGE_API_KEY')
  .action(async (options: { task: string; budget?: string; label?: string } & JudgeOptions) => {
    const judge = judgeConfig(options);
    const log = createLogger();
    const engine = await Engine.open({ home: home(), logger: log.logger, judge });
    const run = await engine.createRun({ taskId: options.task, budget: options.budget, label: options.label });
    log.addFile(join(run.dir, 'server.log'));
    log.logger.info({ run: run.id, dir: run.dir, judge: engine.grader.judge.id }, 'run ready');
    await serveStdio(engine, run);
  });

program
  .command('demo')
  .description("run tasks' oracles end to end through the MCP server and print the results (default: every static task)")
  .option('--task <id...>', 'tasks to run', (value: string, previous: string[] = []) => [...previous, taskOption(value)])
  .option('--budget <spec>', 'limits over each task default', budgetOption)
  .action(async (options: { task?: string[]; budget?: string }) => {
    const tasks = options.task ?? listTaskIds().filter((id) => getTask(id).level <= 2);
    const summaries = [];
    for (const task of tasks) summaries.push(await runDemo({ task, home: home(), budget: options.budget }));
    process.stdout.write(`${formatSummaryTable(summaries)}\n`);
    for (const s of summaries) process.stdout.write(`run ${s.run_id} (${s.task}): ${s.end_reason ?? s.state}\n`);
  });

program
  .command('replay <file>')
  .description('play a scripted replay (JSONL of tool calls) against a fresh run; exits 1 when an expectation fails')
  .requiredOption('--task <id>', 'task to run', taskOption)
  .option('--budget <spec>', 'limits over the task default', budgetOption)
  .option('--label <name>', 'label of the run', 'replay')
  .action(async (file: string, options: { task: string; budget?: string; label: string }) => {
    const replay = loadReplay(file);
    const { client } = await connectStdio({
      task: options.task,
      budget: options.budget,
      label: options.label,
      home: home(),
      stderr: 'ignore',
      clientName: 'a2rl-replay',
    });
    try {
      await playReplay(client, replay, {
        onResult: (outcome) =>
          process.stdout.write(
            `line ${outcome.step.line} ${outcome.step.tool}: ${outcome.isError ? 'error' : 'ok'} (${outcome.calls} call(s), ${outcome.durationMs} ms)\n`,
          ),
      });
    } finally {
      await client.close();
    }
  });

program
  .command('tasks')
  .description('list the tasks')
  .action(() => {
    for (const id of listTaskIds()) {
      const task = getTask(id);
      process.stdout.write(`${task.id}\tlevel ${task.level}\t${task.tier}\t${task.title}\n`);
    }
  });

program.parseAsync().catch((error: unknown) => {
  process.stderr.write(
    `a2rl: ${isA2rlError(error) ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exitCode = 1;
});
