#!/usr/bin/env node
import { Command } from 'commander';
import { resolve } from 'node:path';
import { serverVersion } from '../mcp/server.js';
import { defaultHome } from '../util/paths.js';
import { addAgentConfigCommand } from './agent-config.js';
import { addDemoCommand } from './demo.js';
import { endQuietlyOnClosedPipe, reportFailure } from './exit.js';
import { addGcCommand } from './gc.js';
import { addHostCommands } from './host.js';
import { addIntegrityCommands } from './integrity.js';
import { addPrepareCommand } from './prepare.js';
import { checkHome, type CliContext } from './options.js';
import { addReplayCommand } from './replay.js';
import { addReportCommands } from './reports.js';
import { addRunCommand } from './run.js';
import { addRunsCommands } from './runs.js';
import { addServeCommand } from './serve.js';
import { addSuiteCommands } from './suite.js';
import { addTasksCommand } from './tasks.js';
import { addViewCommands } from './view.js';

const program = new Command()
  .name('a2rl')
  .description('a2rl-bench: benchmark AI agents on agentic RL post-training, over MCP')
  .version(serverVersion)
  .option('--home <dir>', 'where runs, submissions and the store live (default $A2RL_HOME or ~/.a2rl); must exist unless --init')
  .option('--init', 'make the --home folder when it does not exist yet (a new, empty home)')
  .option('--debug', "print an error's stack trace too (an expected failure is one line without it)")
  // Commander's own errors (an unknown option, a bad value) reach the one error path below, for their exit status.
  .exitOverride();

const context: CliContext = { home: () => (program.opts().home as string | undefined) ?? defaultHome() };

/** Commands that never open the home (agent-config only names it in the script it prints): a missing --home is no error there. */
const homeFree = new Set(['agent-config', 'tasks', 'doctor', 'images build']);
program.hook('preAction', (_program, action) => {
  const path: string[] = [];
  for (let command: Command | null = action; command && command !== program; command = command.parent) path.unshift(command.name());
  if (homeFree.has(path.join(' '))) return;
  // A --home naming the default home (a client's configuration spells it out) is the default home.
  const given = program.getOptionValueSource('home') === 'cli' && resolve(context.home()) !== defaultHome();
  checkHome(context.home(), { given, init: program.opts().init === true });
});

addServeCommand(program, context);
const runs = addRunsCommands(program, context);
addIntegrityCommands(runs, context);
addReportCommands(program, runs, context.home);
addDemoCommand(program, context);
addReplayCommand(program, context);
addRunCommand(program, context);
addSuiteCommands(program, context);
addAgentConfigCommand(program, context);
addTasksCommand(program);
addPrepareCommand(program, context);
addHostCommands(program);
addViewCommands(program, context);
addGcCommand(program, context);

endQuietlyOnClosedPipe();
program.parseAsync().catch((error: unknown) => reportFailure(error, program.opts().debug === true));
