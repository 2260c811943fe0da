import { z } from 'zod';
import { maxWriteBytes } from '../src/core/workspace.js';
import { A2rlError } from '../src/util/errors.js';
import { defineTool } from './shared/define.js';

export const writeFileTool = defineTool({
  name: 'write_file',
  title: 'Write a workspace file',
  description:
    'Creates or replaces a text file in the writable part of the workspace (code/, output/, rollouts/ or new folders), ' +
    'e.g. your training script. Parent folders are created. data/, models/, lib/ and instructions.md are read-only. ' +
    `Input: path, content (UTF-8, at most ${maxWriteBytes} bytes), and append=true to add to the end instead. Returns the bytes written and the new file size.`,
  inputSchema: z
    .object({
      path: z.string().min(1).describe('File path relative to the workspace, e.g. "code/train.py"'),
      content: z.string().describe('Text to write'),
      append: z.boolean().default(false).describe('Append instead of replacing'),
    })
    .strict(),
  outputSchema: z.object({ path: z.string(), bytes_written: z.number(), size: z.number() }),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
  handler: async (run, args) => {
    run.assertWorkspaceOpen('write');
    await run.assertDiskRoom(Buffer.byteLength(args.content, 'utf8'));
    let written: ReturnType<typeof run.workspace.writeText>;
    try {
      written = run.workspace.writeText(args.path, args.content, args.append);
    } catch (error) {
      // The kernel's refusal where the workspace is a filesystem of its own, sized to the run's quota.
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOSPC' && code !== 'EDQUOT') throw error;
      throw new A2rlError(
        'QUOTA_EXCEEDED',
        `The workspace is full: its files reached the run's disk quota (or its most files), so ${args.path} was not written whole. ` +
          'Delete what you no longer need (old checkpoints in output/, rollouts/) with exec, e.g. rm -r output/old, then try again.',
      );
    }
    return {
      structured: { path: written.path, bytes_written: written.bytes, size: written.size },
      text: `Wrote ${written.bytes} bytes to ${written.path} (now ${written.size} bytes).`,
    };
  },
});
