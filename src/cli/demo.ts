import { type Command } from 'commander';
import { runDemo } from '../launch/demo.js';
import { listTaskIds } from '../tasks/task.js';
import { budgetOption, type CliContext, taskOption } from './options.js';
import { formatSummaryTable } from './summary-table.js';

/** `a2rl demo`: the tasks' oracles end to end through the MCP server. */
export function addDemoCommand(program: Command, { home }: CliContext): void {
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
}
