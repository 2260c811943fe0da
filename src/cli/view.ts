import { type Command } from 'commander';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Store } from '../store/store.js';
import { A2rlError } from '../util/errors.js';
import { serveView } from '../view/server.js';
import { loginCode, viewToken, viewTokenEnv } from '../view/token.js';
import { type CliContext, portOption } from './options.js';

/** `a2rl view` (the live web view of a home no `serve --http` serves) and `a2rl view-token`. */
export function addViewCommands(program: Command, { home }: CliContext): void {
  program
    .command('view')
    .description(
      'serve the read-only web view of runs, jobs, scores and the leaderboard for this home (serve --http serves it at /view too)',
    )
    .option('--host <address>', 'address to listen on; anything but loopback is reachable from other machines', '127.0.0.1')
    .option('--port <n>', 'port to listen on (0: any free port)', portOption, 8701)
    .option('--allow-host <name>', 'a further Host name browsers may use (repeatable)', (v: string, all: string[]) => [...all, v], [])
    .action(async (options: { host: string; port: number; allowHost: string[] }) => {
      const path = join(home(), 'store.sqlite');
      if (!existsSync(path)) {
        throw new A2rlError('NOT_FOUND', `No a2rl store at ${path}; pass the --home the runs were made with (or set A2RL_HOME).`);
      }
      const store = new Store(path);
      try {
        await serveView({
          store,
          home: home(),
          token: viewToken(home()),
          host: options.host,
          port: options.port,
          allowHosts: options.allowHost,
        });
      } finally {
        store.close();
      }
    });

  program
    .command('view-token')
    .description(
      `print the operator's token that opens the web view (made on first use in $A2RL_HOME/view-token, or $${viewTokenEnv}); run tokens never open it`,
    )
    .option(
      '--link [server url]',
      'print a login link for a browser instead (it works once, within a minute; default server http://127.0.0.1:8700, serve --http)',
    )
    .action((options: { link?: string | true }) => {
      if (options.link === undefined) return void process.stdout.write(`${viewToken(home())}\n`);
      const server = options.link === true ? 'http://127.0.0.1:8700' : options.link;
      let base: URL;
      try {
        base = new URL(server);
      } catch {
        throw new A2rlError('INVALID_INPUT', `--link ${server} is not a URL; give the server's, as http://127.0.0.1:8701.`);
      }
      if (base.protocol !== 'http:' && base.protocol !== 'https:') {
        throw new A2rlError('INVALID_INPUT', `--link ${server} is not an http(s) URL; give the server's, as http://127.0.0.1:8701.`);
      }
      process.stdout.write(`${base.origin}/view?code=${loginCode(viewToken(home()))}\n`);
    });
}
