import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult, ServerNotification, ServerRequest, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { type HostPathView, inAgentView, isA2rlError } from '../../src/util/errors.js';
import { packageRoot } from '../../src/util/paths.js';
import { cannotRecord, isStoreFull } from '../../src/store/disk-full.js';
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
  handler: (run: Run, args: z.infer<I>, extra: ToolExtra) => Promise<ToolOutput<WithNulls<z.infer<O>>>>;
}

/** A result as a handler builds it: an optional field may be null (a store column's "none"); the answer leaves it out. */
export type WithNulls<T> = T extends readonly (infer U)[]
  ? WithNulls<U>[]
  : T extends Record<string, unknown>
    ? { [K in keyof T]: undefined extends T[K] ? WithNulls<Exclude<T[K], undefined>> | null | undefined : WithNulls<T[K]> }
    : T;

/**
 * Leaves null fields out of a result: output schemas declare them optional, not as nullable
 * unions, which the MCP Inspector flags as unportable across clients.
 */
export function withoutNulls(value: unknown): unknown {
  // Most results hold no null: they are returned as they are, with no copy (every call pays this).
  if (!holdsNull(value)) return value;
  if (Array.isArray(value)) return value.map(withoutNulls);
  return Object.fromEntries(
    Object.entries(value as object)
      .filter(([, item]) => item !== null)
      .map(([key, item]) => [key, withoutNulls(item)]),
  );
}

function holdsNull(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  for (const item of Array.isArray(value) ? value : Object.values(value)) if (item === null || holdsNull(item)) return true;
  return false;
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
            const structured = withoutNulls(output.structured) as Record<string, unknown>;
            return {
              content: [{ type: 'text', text: output.text ?? JSON.stringify(structured, null, 2) }],
              structuredContent: structured,
            };
          } catch (error) {
            const views = hostPathViews(run);
            if (isA2rlError(error)) {
              return { isError: true, content: [{ type: 'text', text: `[${error.code}] ${inAgentView(error.message, views)}` }] };
            }
            run.logger.error({ err: error, tool: definition.name, run: run.id }, 'tool failed');
            // Only a tool that changes nothing can say so: another may have failed half way.
            const after = definition.annotations.readOnlyHint
              ? 'Nothing was changed; try again'
              : 'Part of it may have been done: look at what it would have changed (list_files, job_status, get_score) before trying again';
            if (isStoreFull(error)) {
              return {
                isError: true,
                content: [{ type: 'text', text: `[UNAVAILABLE] ${cannotRecord(`${after} later.`, error).message}` }],
              };
            }
            return {
              isError: true,
              content: [
                {
                  type: 'text',
                  text: `[INTERNAL] ${definition.name} failed inside the server: ${inAgentView(String(error), views)}. ${after}, and report it if it persists.`,
                },
              ],
            };
          }
        }) as never,
      );
    },
  };
}

/** The host folders an error message may name, as the run's agent sees them: its workspace and mounts, or nothing. */
function hostPathViews(run: Run): HostPathView[] {
  return [
    ...run.workspace.sandboxMounts().map((mount) => ({ host: mount.source, agent: mount.target })),
    { host: run.home },
    { host: packageRoot },
  ];
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
