#!/usr/bin/env node
import { Command, InvalidArgumentError } from 'commander';
import { join } from 'node:path';
import { parseBudget } from './budget.js';
import { connectStdio } from './client.js';
import { formatSummaryTable, runDemo } from './demo.js';
import { Engine } from './engine.js';
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

program
  .command('serve')
  .description('serve one benchmark run over MCP stdio (stdout is the protocol; logs go to stderr and the run folder)')
  .requiredOption('--task <id>', 'task to run, e.g. micro-gsm8k', taskOption)
  .option('--budget <spec>', 'limits over the task default, e.g. wall=30m,compute=20m,submissions=10,episodes=2000', budgetOption)
  .option('--label <name>', 'who is being benchmarked, e.g. claude-code-opus')
  .action(async (options: { task: string; budget?: string; label?: string }) => {
    const log = createLogger();
    const engine = await Engine.open({ home: home(), logger: log.logger });
    const run = await engine.createRun({ taskId: options.task, budget: options.budget, label: options.label });
    log.addFile(join(run.dir, 'server.log'));
    log.logger.info({ run: run.id, dir: run.dir }, 'run ready');
    await serveStdio(engine, run);
  });

program
  .command('demo')
  .description("run a task's oracle end to end through the MCP server and print the result")
  .option('--task <id>', 'task', taskOption, 'micro-gsm8k')
  .option('--budget <spec>', 'limits over the task default', budgetOption)
  .action(async (options: { task: string; budget?: string }) => {
    const summary = await runDemo({ task: options.task, home: home(), budget: options.budget });
    process.stdout.write(`${formatSummaryTable([summary])}\nrun ${summary.run_id}: ${summary.end_reason ?? summary.state}\n`);
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
