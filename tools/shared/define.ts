import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult, ServerNotification, ServerRequest, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { isA2rlError } from '../../src/util/errors.js';
import type { Run } from '../../src/core/run.js';

export type ToolExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

export interface ToolOutput<O> {
  structured: O;
  /** Text for clients that read only `content`; defaults to the structured result as JSON. */
  text?: string;
}

export interface ToolDefinition<I extends z.ZodObject, O extends z.ZodObject> {
  name: string;
  title: string;
  description: string;
  inputSchema: I;
  outputSchema: O;
  annotations: Omit<ToolAnnotations, 'title'>;
  handler: (run: Run, args: z.infer<I>, extra: ToolExtra) => Promise<ToolOutput<z.infer<O>>>;
}

/** Declares a tool; `register` binds it to a run's MCP server. */
export function defineTool<I extends z.ZodObject, O extends z.ZodObject>(definition: ToolDefinition<I, O>) {
  return {
    ...definition,
    register(server: McpServer, run: Run): void {
      server.registerTool(
        definition.name,
        {
          title: definition.title,
          description: definition.description,
          inputSchema: definition.inputSchema,
          outputSchema: definition.outputSchema,
          annotations: { title: definition.title, ...definition.annotations },
        },
        (async (args: z.infer<I>, extra: ToolExtra): Promise<CallToolResult> => {
          try {
            run.admitCall();
            const output = await definition.handler(run, args, extra);
            return {
              content: [{ type: 'text', text: output.text ?? JSON.stringify(output.structured, null, 2) }],
              structuredContent: output.structured as Record<string, unknown>,
            };
          } catch (error) {
            if (isA2rlError(error)) return { isError: true, content: [{ type: 'text', text: `[${error.code}] ${error.message}` }] };
            run.logger.error({ err: error, tool: definition.name, run: run.id }, 'tool failed');
            return {
              isError: true,
              content: [
                {
                  type: 'text',
                  text: `[INTERNAL] ${definition.name} failed inside the server: ${String(error)}. Nothing was changed; try again, and report it if it persists.`,
                },
              ],
            };
          }
        }) as never,
      );
    },
  };
}

/** Sends a progress notification when the client asked for them (gave a progress token). */
export async function reportProgress(extra: ToolExtra, progress: number, total: number | undefined, message: string): Promise<void> {
  const progressToken = extra._meta?.progressToken;
  if (progressToken === undefined) return;
  await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress, total, message } });
}

/** A shell command line for a sandboxed job; a NUL byte cannot be handed to any process, so it is refused up front. */
export function shellCommandSchema(description: string) {
  return z
    .string()
    .min(1)
    .max(20_000)
    .refine((command) => !command.includes('\0'), 'The command contains a NUL byte, which no program can receive; remove it.')
    .describe(description);
}

/** Longest a tool waits before answering: clients give up on a call after about 60 s. */
export const maxWaitSeconds = 50;
