import { z } from 'zod';
import { defineTool } from './shared/define.js';

export const readInstructionsTool = defineTool({
  name: 'read_instructions',
  title: 'Read the task brief',
  description:
    'Returns the brief of this benchmark run: the objective, the data and base model, the workspace layout, the budget, ' +
    'the rules and how submissions are graded. Read it first. Takes no input; returns the brief as Markdown.',
  inputSchema: z.object({}).strict(),
  outputSchema: z.object({
    task_id: z.string(),
    level: z.number(),
    instructions: z.string().describe('The brief, in Markdown'),
  }),
  annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
  handler: async (run) => ({
    structured: { task_id: run.task.id, level: run.task.level, instructions: run.instructions },
    text: run.instructions,
  }),
});
