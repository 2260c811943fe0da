import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { packageRoot } from './paths.js';
import { serverVersion } from './server.js';

export interface StdioServerOptions {
  task: string;
  budget?: string;
  label?: string;
  home?: string;
  /** Where the server's log lines (its stderr) go; 'pipe' hands the stream to the caller. */
  stderr?: 'inherit' | 'pipe' | 'ignore';
  clientName?: string;
  /** More `serve` flags, e.g. a judge. */
  serverArgs?: string[];
}

/** Starts `a2rl serve` as a child process and connects an MCP client to it over stdio. */
export async function connectStdio(options: StdioServerOptions): Promise<{ client: Client; stderr: Readable | null }> {
  const args = [join(packageRoot, 'dist', 'src', 'cli.js'), 'serve', '--task', options.task];
  if (options.budget) args.push('--budget', options.budget);
  if (options.label) args.push('--label', options.label);
  args.push(...(options.serverArgs ?? []));
  const env: Record<string, string> = Object.fromEntries(
    Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined),
  );
  if (options.home) env.A2RL_HOME = options.home;
  const transport = new StdioClientTransport({ command: process.execPath, args, env, stderr: options.stderr ?? 'inherit' });
  const client = new Client({ name: options.clientName ?? 'a2rl-client', version: serverVersion });
  await client.connect(transport);
  return { client, stderr: transport.stderr as Readable | null };
}
