import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tools } from '../../tools/index.js';
import { packageRoot } from '../util/paths.js';
import type { Run } from '../core/run.js';

export const serverVersion: string = JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')).version;

/** The MCP server of one run: its tools and its instructions resource. Transports are attached by the caller. */
export function createServer(run: Run): McpServer {
  const server = new McpServer(
    { name: 'a2rl-bench', title: 'a2rl-bench', version: serverVersion },
    {
      instructions:
        `This session is an a2rl-bench benchmark run (${run.id}) on task ${run.task.id}: ${run.task.title}. ` +
        'Call read_instructions first: it gives the objective, the workspace, the budget and how you are graded.',
    },
  );
  for (const tool of tools) tool.register(server, run);
  server.registerResource(
    'instructions',
    `a2rl://runs/${run.id}/instructions.md`,
    { title: 'Task brief', description: 'Same text as the read_instructions tool', mimeType: 'text/markdown' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/markdown', text: run.instructions }] }),
  );
  return server;
}
