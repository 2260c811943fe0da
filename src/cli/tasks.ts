import { type Command } from 'commander';
import { getTask, listTaskIds } from '../tasks/task.js';

/** `a2rl tasks`. */
export function addTasksCommand(program: Command): void {
  program
    .command('tasks')
    .description('list the tasks')
    .action(() => {
      for (const id of listTaskIds()) {
        const task = getTask(id);
        process.stdout.write(`${task.id}\tlevel ${task.level}\t${task.tier}\t${task.title}\n`);
      }
    });
}
