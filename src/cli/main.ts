#!/usr/bin/env node
import { Command } from 'commander';
import { serverVersion } from '../mcp/server.js';
import { isA2rlError } from '../util/errors.js';
import { defaultHome } from '../util/paths.js';
import { addAgentConfigCommand } from './agent-config.js';
import { addDemoCommand } from './demo.js';
import { addHostCommands } from './host.js';
import { addIntegrityCommands } from './integrity.js';
import { addPrepareCommand } from './prepare.js';
import type { CliContext } from './options.js';
import { addReplayCommand } from './replay.js';
import { addReportCommands } from './reports.js';
import { addRunCommand } from './run.js';
import { addRunsCommands } from './runs.js';
import { addServeCommand } from './serve.js';
import { addTasksCommand } from './tasks.js';
import { addViewCommands } from './view.js';

const program = new Command()
  .name('a2rl')
  .description('a2rl-bench: benchmark AI agents on agentic RL post-training, over MCP')
  .version(serverVersion)
  .option('--home <dir>', 'where runs, submissions and the store live (default $A2RL_HOME or ~/.a2rl)');

const context: CliContext = { home: () => (program.opts().home as string | undefined) ?? defaultHome() };

addServeCommand(program, context);
const runs = addRunsCommands(program, context);
addIntegrityCommands(runs, context);
addReportCommands(program, runs, context.home);
addDemoCommand(program, context);
addReplayCommand(program, context);
addRunCommand(program, context);
addAgentConfigCommand(program, context);
addTasksCommand(program);
addPrepareCommand(program, context);
addHostCommands(program);
addViewCommands(program, context);

program.parseAsync().catch((error: unknown) => {
  process.stderr.write(
    `a2rl: ${isA2rlError(error) ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exitCode = 1;
});
