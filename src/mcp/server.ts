import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
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
  answerSdkErrorsWithCodes(server);
  server.registerResource(
    'instructions',
    `a2rl://runs/${run.id}/instructions.md`,
    { title: 'Task brief', description: 'Same text as the read_instructions tool', mimeType: 'text/markdown' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/markdown', text: run.instructions }] }),
  );
  return server;
}

/**
 * The SDK answers some tool calls itself, before any handler: arguments that fail the tool's
 * input schema (`-32602 Input validation error`), an unknown tool, a result that fails its
 * output schema. Its `createToolError` is the one place those answers are made; here they get
 * the `[CODE] what to do instead` form every other error has.
 */
function answerSdkErrorsWithCodes(server: McpServer): void {
  (server as unknown as { createToolError(message: string): CallToolResult }).createToolError = (message) => ({
    isError: true,
    content: [{ type: 'text', text: codedSdkError(message) }],
  });
}

function codedSdkError(message: string): string {
  const text = message.replace(/^MCP error -?\d+: /, '');
  const invalid = /^Input validation error: Invalid arguments for tool (\S+): ([\s\S]*)$/.exec(text);
  if (invalid) {
    return `[INVALID_INPUT] Invalid arguments for ${invalid[1]}: ${invalid[2]!.trim()}\nFix them as the tool's input schema says and call it again; nothing was changed.`;
  }
  const unknown = /^Tool (\S+) not found$/.exec(text);
  if (unknown) return `[NOT_FOUND] There is no tool ${unknown[1]} on this server; list the tools and call one of them.`;
  if (/^Output validation error/.test(text))
    return `[INTERNAL] ${text}. Report it; the call itself may have taken effect, check with the read tools.`;
  return `[INVALID_INPUT] ${text}`;
}
