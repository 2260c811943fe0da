import { type Command, Option } from 'commander';
import { type DemoResult, oracleOf, runDemo } from '../launch/demo.js';
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
      const results: DemoResult[] = [];
      const started = Date.now();
      for (const [index, task] of tasks.entries()) {
        const elapsed = (Date.now() - started) / 60_000;
        // With tasks done, the rest is estimated at their mean.
        const eta = index > 0 ? `, about ${Math.ceil((elapsed / index) * (tasks.length - index))} min left` : '';
        process.stderr.write(`a2rl demo: task ${index + 1}/${tasks.length}, ${task} (${elapsed.toFixed(1)} min so far${eta})\n`);
        results.push(await runDemo({ task, route, home: home(), budget: options.budget }));
      }
      const summaries = results.flatMap((result) => (result.summary ? [result.summary] : []));
      if (summaries.length > 0) process.stdout.write(`${formatSummaryTable(summaries)}\n`);
      for (const s of summaries) process.stdout.write(`run ${s.run_id} (${s.task}): ${s.end_reason ?? s.state}\n`);
      const failed = results.filter((result) => result.failure);
      for (const { task, failure } of failed) process.stderr.write(`a2rl: demo: ${task} failed: ${failure}\n`);
      if (failed.length > 0) process.exitCode = demoExitStatus(failed[0]!.task);
    });
}

/** The demo's exit status when a task failed: 100 + the task's place in `a2rl tasks` (1 = the first), whichever tasks ran. */
export function demoExitStatus(task: string): number {
  return 100 + listTaskIds().indexOf(task) + 1;
}
