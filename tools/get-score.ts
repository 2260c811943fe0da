import { z } from 'zod';
import type { Run } from '../src/core/run.js';
import { bestSubmission, parseSubmissionId, submissionId } from '../src/core/submissions.js';
import { type SubmissionView, viewSubmission } from './shared/submission-view.js';
import { A2rlError } from '../src/util/errors.js';
import { defineTool, maxWaitSeconds, reportProgress } from './shared/define.js';

const submissionSchema = z.object({
  submission_id: z.string(),
  path: z.string(),
  note: z.string().optional(),
  state: z.enum(['queued', 'grading', 'graded', 'failed']),
  score: z.number().optional().describe('Score (0-100) on the public half of the evaluation set'),
  metrics: z
    .record(z.string(), z.union([z.number(), z.string()]))
    .optional()
    .describe("The grader's other numbers on the public half, e.g. lc_win_rate and the judge"),
  error: z.string().optional().describe('Why grading failed'),
  content_hash: z.string(),
  submitted_at_s: z.number(),
  graded_at_s: z.number().optional(),
});

export const getScoreTool = defineTool({
  name: 'get_score',
  title: 'Scores',
  description:
    "Shows grading results: one submission (by submission_id) or all of this run's, the best score so far, and the " +
    "baseline (the untouched base model's score, or why its grading failed). Scores are 0-100 on the public half of the held-out evaluation set. " +
    `With submission_id and wait_seconds (at most ${maxWaitSeconds}) it waits for that grading to finish, sending progress notifications.`,
  inputSchema: z
    .object({
      submission_id: z.string().optional().describe('A submission id such as "sub-1"; omit for all'),
      wait_seconds: z.number().min(0).max(maxWaitSeconds).default(0).describe('Wait up to this long for the grading to finish'),
    })
    .strict(),
  outputSchema: z.object({
    submissions: z.array(submissionSchema),
    best: z.object({ submission_id: z.string(), score: z.number() }).optional(),
    baseline: z.object({
      state: z.enum(['graded', 'pending', 'failed']),
      score: z.number().optional(),
      error: z.string().optional().describe("Why the base model's grading failed; the server grades it again when the run is next served"),
    }),
    improvement: z.number().optional().describe('Best score minus baseline'),
  }),
  annotations: { readOnlyHint: true, idempotentHint: false, openWorldHint: false },
  handler: async (run, args, extra) => {
    let views: SubmissionView[];
    if (args.submission_id !== undefined) {
      const id = parseSubmissionId(args.submission_id);
      const deadline = Date.now() + args.wait_seconds * 1000;
      let row = find(run, id, args.submission_id);
      // Progress before each pause, never just before the answer (see waitForJob).
      while ((row.state === 'queued' || row.state === 'grading') && Date.now() < deadline && !extra.signal.aborted) {
        await reportProgress(extra, Math.round((Date.now() - row.created_at) / 1000), undefined, `sub-${id} ${row.state}`);
        await new Promise((resolve) => setTimeout(resolve, Math.min(1000, deadline - Date.now())));
        row = find(run, id, args.submission_id);
      }
      views = [viewSubmission(run, row)];
    } else {
      views = run.listSubmissions().map((row) => viewSubmission(run, row));
    }
    const graded = bestSubmission(run.gradedSubmissions());
    // Graded submissions carry the store's ids (reports name them so); the agent knows its run's own numbers.
    const bestRow = graded && run.listSubmissions().find((row) => submissionId(row.id) === graded.submission_id);
    const best = graded && bestRow ? { ...graded, submission_id: submissionId(bestRow.seq) } : null;
    const status = run.baselineStatus();
    const baseline = {
      state: status.state === 'graded' || status.state === 'failed' ? status.state : ('pending' as const),
      score: status.state === 'graded' ? status.grade.public_score : null,
      error: status.state === 'failed' ? status.error : null,
    };
    const improvement = best && baseline.score !== null ? Math.round((best.public - baseline.score) * 100) / 100 : null;
    const structured = {
      submissions: views,
      best: best ? { submission_id: best.submission_id, score: best.public } : null,
      baseline,
      improvement,
    };
    const lines = views.map(
      (s) => `${s.submission_id} ${s.path}: ${s.state}${s.score === null ? '' : ` score ${s.score}`}${s.error ? ` (${s.error})` : ''}`,
    );
    lines.push(
      `baseline: ${baseline.score ?? (baseline.error === null ? 'pending' : `failed (${baseline.error})`)}; best: ${best ? `${best.public} (${best.submission_id})` : 'none yet'}${improvement === null ? '' : `; improvement ${improvement}`}`,
    );
    return { structured, text: lines.join('\n') };
  },
});

function find(run: Run, id: number, shown: string) {
  const row = run.submission(id);
  if (!row) throw new A2rlError('NOT_FOUND', `No submission "${shown}" in this run. List yours with get_score and no submission_id.`);
  return row;
}
