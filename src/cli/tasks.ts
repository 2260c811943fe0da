import { type Command } from 'commander';
import { join } from 'node:path';
import { listTaskIds, readTaskFile } from '../tasks/task.js';
import { tasksRoot } from '../util/paths.js';

/** `a2rl tasks`. */
export function addTasksCommand(program: Command): void {
  program
    .command('tasks')
    .description('list the tasks')
    .action(() => {
      for (const id of listTaskIds()) {
        // The declaration only: a full-tier task is listed though its runs are not served yet.
        const task = readTaskFile(join(tasksRoot, id));
        process.stdout.write(`${task.id}\tlevel ${task.level}\t${task.tier}\t${task.title}\n`);
      }
    });
}
