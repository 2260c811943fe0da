import { z } from 'zod';
import { defineTool } from './shared/define.js';

const maxEntries = 1000;

export const listFilesTool = defineTool({
  name: 'list_files',
  title: 'List workspace files',
  description:
    'Lists files and folders of the run workspace (the sandbox sees it as /workspace). Use it to find data, the base model, ' +
    'your code, checkpoints and rollout files. Input: a folder path relative to the workspace (default: its root) and how many ' +
    `levels deep to go. Returns entries with path, type, size in bytes and whether they are read-only; at most ${maxEntries}.`,
  inputSchema: z
    .object({
      path: z.string().default('.').describe('Folder relative to the workspace, e.g. "output"; "." for the root'),
      depth: z.number().int().min(1).max(6).default(2).describe('Levels to descend, 1 to 6'),
    })
    .strict(),
  outputSchema: z.object({
    path: z.string(),
    entries: z.array(
      z.object({ path: z.string(), type: z.enum(['file', 'dir', 'symlink', 'other']), size: z.number(), read_only: z.boolean() }),
    ),
    truncated: z.boolean().describe(`True when more than ${maxEntries} entries matched; list a subfolder instead`),
    unlisted_names: z
      .number()
      .optional()
      .describe('Entries left out because their names are not valid UTF-8 (no tool can name them); rename them with exec'),
  }),
  annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  handler: async (run, args) => {
    run.assertWorkspaceOpen('read');
    const { entries, truncated, unspellable } = run.workspace.list(args.path, args.depth, maxEntries);
    const text = entries
      .map(
        (e) =>
          `${e.type === 'dir' ? 'd' : e.type === 'symlink' ? 'l' : '-'}${e.read_only ? 'r-' : 'rw'} ${String(e.size).padStart(10)}  ${e.path}${e.type === 'dir' ? '/' : ''}`,
      )
      .join('\n');
    return {
      structured: { path: args.path, entries, truncated, ...(unspellable > 0 ? { unlisted_names: unspellable } : {}) },
      text:
        `${text}${truncated ? '\n… (truncated: list a subfolder)' : ''}${unspellable > 0 ? `\n… ${unspellable} names that are not valid UTF-8 left out: rename them with exec` : ''}` ||
        '(empty)',
    };
  },
});
