import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { readFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { z } from 'zod';
import { A2rlError } from '../util/errors.js';
import { cliEntry } from '../util/paths.js';
import { serverVersion } from '../mcp/server.js';

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
  const args = [cliEntry, 'serve', '--task', options.task];
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

/** Connects an MCP client over Streamable HTTP to a run of `a2rl serve --http`, with its bearer token. */
export async function connectHttp(url: string, token: string, clientName = 'a2rl-client'): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  const client = new Client({ name: clientName, version: serverVersion });
  await client.connect(transport);
  return client;
}

const mcpConfigSchema = z.object({
  mcpServers: z.record(
    z.string(),
    z.union([
      z.object({ type: z.literal('stdio').optional(), command: z.string(), args: z.array(z.string()).default([]) }),
      z.object({ type: z.literal('http'), url: z.string(), headers: z.record(z.string(), z.string()).default({}) }),
    ]),
  ),
});

/** Connects to the server named `name` in an `mcpServers` JSON file (Claude Code's format, which `a2rl run` writes). */
export async function connectFromMcpConfig(file: string, name = 'a2rl', clientName = 'a2rl-client'): Promise<Client> {
  let parsed;
  try {
    parsed = mcpConfigSchema.parse(JSON.parse(readFileSync(file, 'utf8')));
  } catch (error) {
    throw new A2rlError('INVALID_INPUT', `${file} is not an mcpServers JSON file: ${(error as Error).message}`, { cause: error });
  }
  const server = parsed.mcpServers[name];
  if (!server)
    throw new A2rlError('INVALID_INPUT', `${file} names no MCP server "${name}" (it has: ${Object.keys(parsed.mcpServers).join(', ')}).`);
  const transport =
    server.type === 'http'
      ? new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers: server.headers } })
      : new StdioClientTransport({ command: server.command, args: server.args, stderr: 'inherit' });
  const client = new Client({ name: clientName, version: serverVersion });
  await client.connect(transport);
  return client;
}
