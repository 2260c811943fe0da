import { Argument, type Command, Option } from 'commander';
import { manualAgents, manualConfig } from '../launch/manual-config.js';
import { budgetOption, type CliContext, taskOption } from './options.js';

/** `a2rl agent-config`: the configuration `a2rl run` gives an agent CLI, as a script a person runs by hand. */
export function addAgentConfigCommand(program: Command, { home }: CliContext): void {
  program
    .command('agent-config')
    .description(
      'print a shell script that runs an agent CLI on an a2rl run with what a2rl run gives it (only the a2rl tools, a private ' +
        'HOME, a fresh folder), not jailed; to benchmark, use a2rl run',
    )
    .addArgument(new Argument('<agent>', manualAgents.join(', ')).choices(manualAgents))
    .addOption(
      new Option('--transport <kind>', 'stdio: the CLI starts the server for a new run; http: it connects to a run of serve --http')
        .choices(['stdio', 'http'])
        .default('stdio'),
    )
    .option('--task <id>', 'stdio: the task of the new run, e.g. micro-gsm8k', taskOption)
    .option('--budget <spec>', 'stdio: limits over the task default, e.g. wall=30m', budgetOption)
    .option('--label <name>', 'stdio: label of the new run (default: the agent)')
    .option(
      '--model <name>',
      "the agent's driver model, as a2rl run --model gives it (OpenCode: a NAME without a provider is served at $OPENAI_BASE_URL)",
    )
    .option('--url <url>', 'http: the MCP URL of serve --http (default http://127.0.0.1:8700/mcp); the token comes from $A2RL_RUN_TOKEN')
    .action(
      (
        agent: string,
        options: { transport: 'stdio' | 'http'; task?: string; budget?: string; label?: string; model?: string; url?: string },
      ) => {
        process.stdout.write(manualConfig({ agent, home: home(), ...options }));
      },
    );
}
