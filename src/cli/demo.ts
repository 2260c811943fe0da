import { type Command, Option } from 'commander';
import { oracleOf, runDemo } from '../launch/demo.js';
import { getTask, listTaskIds, type OracleRoute, oracleRoutes } from '../tasks/task.js';
import { budgetOption, type CliContext, taskOption } from './options.js';
import { formatSummaryTable } from './summary-table.js';

/** `a2rl demo`: the tasks' oracles end to end through the MCP server. */
export function addDemoCommand(program: Command, { home }: CliContext): void {
  program
    .command('demo')
    .description("run tasks' oracles end to end through the MCP server and print the results (default: every task)")
    .option('--task <id...>', 'tasks to run', (value: string, previous: string[] = []) => [...previous, taskOption(value)])
    .option('--budget <spec>', 'limits over each task default', budgetOption)
    .addOption(
      new Option('--route <route>', "which oracle: every task's of this route (default: each task's main oracle)").choices(oracleRoutes),
    )
    .action(async (options: { task?: string[]; budget?: string; route?: OracleRoute }) => {
      const { route } = options;
      // Named tasks must have the route; by default, the tasks that have one.
      const tasks =
        options.task ?? listTaskIds('micro').filter((id) => route === undefined || getTask(id).oracles.some((o) => o.route === route));
      for (const task of tasks) oracleOf(getTask(task), route);
      const summaries = [];
      for (const task of tasks) summaries.push(await runDemo({ task, route, home: home(), budget: options.budget }));
      process.stdout.write(`${formatSummaryTable(summaries)}\n`);
      for (const s of summaries) process.stdout.write(`run ${s.run_id} (${s.task}): ${s.end_reason ?? s.state}\n`);
    });
}
