import { type Command } from 'commander';
import { serverName } from '../launch/agents.js';
import { connectFromMcpConfig, connectHttp, connectStdio } from '../launch/client.js';
import { loadReplay, playReplay } from '../launch/replay.js';
import { A2rlError } from '../util/errors.js';
import { type Progress, startProgress } from '../util/progress.js';
import { budgetOption, type CliContext, taskOption } from './options.js';

/** `a2rl replay`: a scripted replay through a real MCP client. */
export function addReplayCommand(program: Command, { home }: CliContext): void {
  program
    .command('replay <file>')
    .description(
      'play a scripted replay (JSONL of tool calls) through a real MCP client: against a fresh local run (--task), a run of a ' +
        'remote server (--url, --token) or the server of an mcpServers file (--mcp-config); exits 1 when an expectation fails',
    )
    .option('--task <id>', 'play against a fresh local run of this task', taskOption)
    .option('--budget <spec>', 'with --task: limits over the task default', budgetOption)
    .option('--label <name>', 'with --task: label of the run', 'replay')
    .option('--url <url>', 'play against a run of a2rl serve --http, e.g. http://127.0.0.1:8700/mcp (Streamable HTTP)')
    .option('--token <token>', 'with --url: the run token (default: $A2RL_RUN_TOKEN)')
    .option('--mcp-config <file>', 'play against the "a2rl" server of an mcpServers JSON file (what a2rl run writes)')
    .action(
      async (
        file: string,
        options: { task?: string; budget?: string; label: string; url?: string; token?: string; mcpConfig?: string },
      ) => {
        const replay = loadReplay(file);
        const targets = [options.task, options.url, options.mcpConfig].filter((target) => target !== undefined);
        if (targets.length !== 1) {
          throw new A2rlError(
            'INVALID_INPUT',
            'replay plays against one server: give --task ID, or --url URL with --token, or --mcp-config FILE.',
          );
        }
        const token = options.token ?? process.env.A2RL_RUN_TOKEN;
        if (options.url && !token) {
          throw new A2rlError('INVALID_INPUT', '--url needs the run token: --token TOKEN, or A2RL_RUN_TOKEN in the environment.');
        }
        const client = options.task
          ? (
              await connectStdio({
                task: options.task,
                budget: options.budget,
                label: options.label,
                home: home(),
                stderr: 'ignore',
                clientName: 'a2rl-replay',
              })
            ).client
          : options.url
            ? await connectHttp(options.url, token!, 'a2rl-replay')
            : await connectFromMcpConfig(options.mcpConfig!, serverName, 'a2rl-replay');
        // stdout is the steps' JSON lines; how far the replay is (a long step: a job, a grading) shows on stderr.
        let progress: Progress | undefined;
        try {
          await playReplay(client, replay, {
            onStep: (step, index, total) => {
              progress ??= startProgress('a2rl replay', total);
              progress.note(`step ${index + 1}, line ${step.line}: ${step.tool}`);
            },
            onResult: (outcome) => {
              progress?.tick();
              process.stdout.write(
                `${JSON.stringify({ line: outcome.step.line, tool: outcome.step.tool, ok: !outcome.isError, calls: outcome.calls, duration_ms: outcome.durationMs })}\n`,
              );
            },
          });
        } finally {
          progress?.stop();
          await client.close();
        }
      },
    );
}
