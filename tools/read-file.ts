import { z } from 'zod';
import { maxReadBytes } from '../src/core/workspace.js';
import { defineTool } from './shared/define.js';

export const readFileTool = defineTool({
  name: 'read_file',
  title: 'Read a workspace file',
  description:
    'Reads a text file of the run workspace: data samples, the libraries in lib/, your code, logs your scripts wrote. ' +
    `Input: a path relative to the workspace, an optional byte offset and a maximum length (default 65536, at most ${maxReadBytes}). ` +
    'Returns the text, the file size, and whether more follows (read on with a larger offset). Binary files are refused: inspect them with exec.',
  inputSchema: z
    .object({
      path: z.string().min(1).describe('File path relative to the workspace, e.g. "data/train.jsonl"'),
      offset: z.number().int().min(0).default(0).describe('Byte offset to start at'),
      max_bytes: z.number().int().min(1).max(maxReadBytes).default(65536).describe('Most bytes to return'),
    })
    .strict(),
  outputSchema: z.object({
    path: z.string(),
    content: z.string(),
    size: z.number().describe('File size in bytes'),
    truncated: z.boolean().describe('True when the file goes on past what was returned'),
  }),
  annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  handler: async (run, args) => {
    run.assertWorkspaceOpen('read');
    const file = run.workspace.readText(args.path, args.offset, args.max_bytes);
    return {
      structured: file,
      text:
        file.content +
        (file.truncated ? `\n… [${file.size - args.offset - Buffer.byteLength(file.content)} more bytes; read on with offset]` : ''),
    };
  },
});
