import { z } from 'zod';
import { viewSubmission } from './shared/submission-view.js';
import { defineTool } from './shared/define.js';

export const submitArtifactTool = defineTool({
  name: 'submit_artifact',
  title: 'Submit a checkpoint for grading',
  description:
    'Submits a checkpoint folder of the workspace (e.g. "output/final", holding config.json and model.pt) for grading on ' +
    'the held-out evaluation set. The folder is copied out of your reach at once, so what is graded is what it held now. ' +
    'Returns a submission id at once; grading takes seconds to minutes: read the score with get_score (wait_seconds to wait). ' +
    "Each submission uses one of the run's submissions; the same content submitted again returns the earlier submission " +
    'and costs nothing. The base model unchanged, empty folders, symlinks and incomplete checkpoints are refused.',
  inputSchema: z
    .object({
      path: z.string().min(1).describe('Checkpoint folder relative to the workspace'),
      note: z.string().max(500).optional().describe('What this checkpoint is, for your own record (e.g. "SFT 800 steps lr 3e-3")'),
    })
    .strict(),
  outputSchema: z.object({
    submission_id: z.string(),
    state: z.enum(['queued', 'grading', 'graded', 'failed']),
    duplicate: z.boolean().describe('True when identical content was submitted before: this is that submission'),
    score: z.number().optional(),
    content_hash: z.string(),
    submissions_left: z.number(),
  }),
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  handler: async (run, args) => {
    const { submission, duplicate } = await run.submit(args.path, args.note);
    const view = viewSubmission(run, submission);
    const left = run.budget().submissions.left;
    const structured = {
      submission_id: view.submission_id,
      state: view.state,
      duplicate,
      score: view.score,
      content_hash: view.content_hash,
      submissions_left: left,
    };
    const text = duplicate
      ? `${view.path} has the same content as ${view.submission_id} (${view.state}${view.score === null ? '' : `, score ${view.score}`}); nothing new was submitted.`
      : `Submitted ${view.path} as ${view.submission_id}, queued for grading. ${left} submissions left. Read the score with get_score.`;
    return { structured, text };
  },
});
