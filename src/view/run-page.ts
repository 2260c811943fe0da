import type { EventRow, JobRow, RunRow, SubmissionRow } from '../store/store.js';
import { runIntegrity } from '../integrity/verdict.js';
import { integrityBlock } from '../reports/render.js';
import { submissionId } from '../core/submissions.js';
import type { ViewData } from './data.js';
import { budgetBar, cell, clock, escapeHtml, page, score } from './html.js';
import { curveBytes, maxPushBytes, newestLines, readLogFrom } from './log-tail.js';
import { jobId } from '../core/job-ids.js';
import { curveNotes, lossCurve } from '../reports/metrics.js';
import { timelineLimits } from '../reports/timeline.js';

/**
 * One run's page: its budget, the timeline of tool calls, its jobs with a live log tail and training curve, its
 * rollouts' reward over time, its submissions and grades, and the agent's transcript where one was recorded.
 */

/** Tool calls a page shows at first; newer ones are added live. */
const timelineLength = 200;
/** Most of an agent's transcript a page shows (its end). */
const transcriptBytes = 32 * 1024;
/** Jobs with a card: an agent's exec commands are in the timeline already. */
export const cardKinds = new Set(['training', 'rollouts', 'grading']);

const brief = (value: unknown, length = 160): string => {
  const text = typeof value === 'string' ? value : JSON.stringify(value ?? '');
  return text.length > length ? `${text.slice(0, length)}…` : text;
};

/** Most of one tool call's arguments a row holds: whole for any usual call (events.jsonl keeps them all). */
const argumentChars = timelineLimits.toolTextChars;

/** A tool call's arguments: short ones as they are, longer ones whole but folded, their start shown. */
function argumentsCell(value: unknown): string {
  const line = typeof value === 'string' ? value : JSON.stringify(value ?? '');
  if (line.length <= 100) return `<code>${escapeHtml(line)}</code>`;
  const whole = typeof value === 'string' ? value : JSON.stringify(value, null, 2);
  const shown =
    whole.length > argumentChars
      ? `${whole.slice(0, argumentChars)}… (${whole.length - argumentChars} more characters in events.jsonl)`
      : whole;
  return `<details><summary><code>${escapeHtml(line.slice(0, 100))}…</code></summary><pre class="arguments">${escapeHtml(shown)}</pre></details>`;
}

/** One tool call of the timeline; the live stream sends each new one. */
export function toolRow(event: EventRow): string {
  const data = JSON.parse(event.data) as { arguments?: unknown; error?: string; result?: unknown; duration_ms?: number };
  const outcome =
    data.error === undefined
      ? `<span class="ok">ok</span> <span class="muted">${escapeHtml(brief(data.result, 80))}</span>`
      : `<span class="err">error</span> ${escapeHtml(brief(data.error))}`;
  return (
    `<tr data-event="${event.id}"><td>${clock(event.at)}</td><td><code>${escapeHtml(event.name)}</code></td>` +
    `<td>${argumentsCell(data.arguments)}</td><td>${outcome}</td><td class="num">${data.duration_ms ?? '–'} ms</td></tr>`
  );
}

/** A job's state line; the live stream sends it again when the job changes. */
export function jobStatus(job: JobRow): string {
  const ran = ((job.ended_at ?? Date.now()) - job.created_at) / 1000;
  return (
    `<span class="state ${job.state}">${escapeHtml(job.state)}</span> ${job.kind}, ${ran.toFixed(0)} s, ${job.cpu_s.toFixed(1)} CPU-s` +
    `${job.exit_code !== null ? `, exit ${job.exit_code}` : ''}${job.reason ? ` <span class="muted">(${escapeHtml(job.reason)})</span>` : ''}`
  );
}

/** A job's card: status, log tail and (for training) the curve, with the log offset its live tail continues from. */
export async function jobCard(job: JobRow): Promise<{ html: string; offset: number }> {
  // One read for both, so the curve shows no step the tail lacks and the live tail goes on from where both end.
  const read = await readLogFrom(job.log_path, 0, job.kind === 'training' ? curveBytes : maxPushBytes, job.state !== 'running');
  const curve = lossCurve(job.kind === 'training' ? read.text : '');
  const notes = curveNotes(curve);
  const tail = newestLines(read.text, maxPushBytes);
  const html =
    `<article class="job" id="card-${job.id}" data-job="${job.id}" data-offset="${read.next}" aria-labelledby="card-${job.id}-title">` +
    `<h3 id="card-${job.id}-title">${jobId(job)} <code>${escapeHtml(brief(job.command, 100))}</code></h3>` +
    `<p class="status">${jobStatus(job)}</p>` +
    (job.kind === 'training'
      ? `<div class="chart" role="img" aria-label="Training loss by step of ${jobId(job)}" data-points="${curve.points.length}" data-curve="${escapeHtml(JSON.stringify(curve.points))}"></div>` +
        (notes.length > 0 ? `<p class="muted">As of this page's load: ${notes.join('; ')}.</p>` : '')
      : '') +
    `<pre class="log" tabindex="0" aria-label="Log of ${jobId(job)}, newest last">${read.skipped > 0 || tail.cut ? '… earlier output not shown\n' : ''}${escapeHtml(tail.text)}</pre></article>`;
  return { html, offset: read.next };
}

export function submissionsTable(data: ViewData, runId: string): string {
  const run = data.store.getRun(runId)!;
  const rows = data.store.listSubmissions(runId).map((s: SubmissionRow) => {
    const grade = s.state === 'graded' ? data.store.getGrade(run.task_id, run.grader_version, s.content_hash) : undefined;
    return (
      `<tr><td>${submissionId(s.seq)}</td><td>${clock(s.created_at)}</td><td><code>${escapeHtml(s.path)}</code></td>` +
      `<td><span class="state ${s.state}">${s.state}</span>${s.error ? ` <span class="muted">${escapeHtml(brief(s.error))}</span>` : ''}</td>` +
      `<td class="num">${score(grade?.public_score)}</td><td class="num">${score(grade?.private_score)}</td></tr>`
    );
  });
  return (
    `<table><thead><tr><th scope="col">submission</th><th scope="col">at</th><th scope="col">path</th><th scope="col">state</th>` +
    `<th scope="col">public</th><th scope="col">private</th></tr></thead><tbody>${rows.join('') || '<tr><td colspan="6">none yet</td></tr>'}</tbody></table>`
  );
}

/** A rollout batch's point on the reward chart: seconds into the run, mean reward. */
export function rewardPoint(event: EventRow): [number, number] | undefined {
  const { mean_reward } = JSON.parse(event.data) as { mean_reward?: number | null };
  return typeof mean_reward === 'number' ? [Math.round(event.t_rel_ms / 100) / 10, mean_reward] : undefined;
}

export function budgetSection(data: ViewData, runId: string): string {
  const summary = data.summaryOf(runId)!;
  return (
    `<p><span class="state ${summary.state}">${summary.state}</span>${summary.end_reason ? ` <span class="muted">${escapeHtml(summary.end_reason)}</span>` : ''}` +
    ` · best public <strong>${score(summary.best_public)}</strong> vs baseline ${score(summary.baseline_public)}</p>` +
    `<div class="budgets">${summary.budget.map(budgetBar).join('')}</div>`
  );
}

/** The run's integrity verdict, what its check read and left unread, as its report shows them; none while it runs. */
function integritySection(data: ViewData, run: RunRow): string {
  if (run.state !== 'ended') return '<p class="none">checked when the run ends</p>';
  const evidence = `Evidence: <a href="/view/runs/${encodeURIComponent(run.id)}/export/integrity.json">integrity.json</a>.`;
  return integrityBlock(runIntegrity(data.store, run.id), evidence);
}

/** The transcript, a line to an element so the search box can show only the lines that match. */
const transcriptLines = (text: string) =>
  text
    .split('\n')
    .map((line) => `<span class="line">${escapeHtml(line)}\n</span>`)
    .join('');

/** `csrf`: the browser session's CSRF token, which the export form posts back (empty for a bearer request). */
export async function runPage(data: ViewData, runId: string, csrf = ''): Promise<string | undefined> {
  const run = data.store.getRun(runId);
  if (!run) return undefined;
  const after = data.lastEventId();
  const id = encodeURIComponent(run.id);
  const tools = data.store.db
    .prepare(`SELECT * FROM events WHERE run_id = ? AND kind = 'tool' AND id <= ? ORDER BY id DESC LIMIT ${timelineLength}`)
    .all(run.id, after) as EventRow[];
  const rewards = data.store
    .listEvents(run.id, 'rollouts')
    .filter((e) => e.name === 'batch' && e.id <= after)
    .flatMap((e) => rewardPoint(e) ?? []);
  const cards = await Promise.all(
    data.store
      .listJobs(run.id)
      .filter((job) => cardKinds.has(job.kind))
      .map(async (job) => (await jobCard(job)).html),
  );
  const launch = data.launchOf(run.id);
  const transcript = launch.transcript ? await readLogFrom(launch.transcript, 0, transcriptBytes, true) : undefined;
  const body =
    `<h1>Run ${escapeHtml(run.id)}</h1>` +
    `<div class="overview"><div>` +
    `<dl class="facts"><dt>task</dt><dd>${cell(run.task_id)}</dd><dt>agent</dt><dd>${cell(run.agent ?? run.label)}` +
    `${run.agent_version ? ` ${escapeHtml(run.agent_version)}` : ''}</dd><dt>driver model</dt><dd>${cell(run.driver_model)}</dd>` +
    `<dt>batch</dt><dd>${cell(launch.batch)}</dd><dt>started</dt><dd>${new Date(run.created_at).toISOString()}</dd></dl>` +
    `<form class="links" method="post" action="/view/runs/${id}/export"><input type="hidden" name="csrf" value="${escapeHtml(csrf)}">` +
    `<button type="submit">Write the export</button> and open its static report · <a href="/view/runs/${id}/export/">Export folder</a>` +
    ` <span class="muted">(as last written, as <code>a2rl runs export ${escapeHtml(run.id)}</code> writes it)</span></form>` +
    `</div>` +
    `<section aria-labelledby="h-budget"><h2 id="h-budget">Budget and score</h2><div id="budget">${budgetSection(data, run.id)}</div></section>` +
    `<section aria-labelledby="h-integrity"><h2 id="h-integrity">Integrity</h2><div id="integrity">${integritySection(data, run)}</div></section>` +
    `</div><div class="columns"><div>` +
    `<section aria-labelledby="h-jobs"><h2 id="h-jobs">Jobs</h2><div id="jobs">${cards.join('\n') || '<p class="none">none yet</p>'}</div></section>` +
    `<section aria-labelledby="h-rollouts"><h2 id="h-rollouts">Rollouts: mean reward over time</h2>` +
    `<div id="rewards" class="chart" role="img" aria-label="Mean reward of each rollout batch by seconds into the run" data-points="${rewards.length}" data-curve="${escapeHtml(JSON.stringify(rewards))}"></div>` +
    `${rewards.length === 0 ? '<p class="none">no rollout batch yet</p>' : ''}</section>` +
    `</div><div>` +
    `<section aria-labelledby="h-tools"><h2 id="h-tools">Tool calls</h2>` +
    `<p><input type="search" id="run-search" placeholder="Search tool calls and the transcript" aria-label="Search the tool calls and the agent transcript">` +
    ` <span id="run-search-count" aria-live="polite"></span></p><div class="scroll"><table id="tools"><thead><tr>` +
    `<th scope="col">at</th><th scope="col">tool</th><th scope="col">arguments</th><th scope="col">result</th><th scope="col">took</th></tr></thead>` +
    `<tbody>${tools.map(toolRow).join('\n')}</tbody></table></div></section>` +
    `<section aria-labelledby="h-subs"><h2 id="h-subs">Submissions and grades</h2><div id="submissions" class="scroll">${submissionsTable(data, run.id)}</div></section>` +
    `</div></div>` +
    `<section aria-labelledby="h-transcript"><h2 id="h-transcript">Agent transcript</h2>` +
    (transcript
      ? `<p class="muted">The end of <code>${escapeHtml(launch.transcript!)}</code>, as of this page's load.</p><pre class="log" id="transcript" tabindex="0">${transcriptLines(transcript.text)}</pre>`
      : '<p class="none">none recorded (the agent was not started by a2rl run)</p>') +
    `</section>`;
  return page({
    title: `Run ${run.id}`,
    current: 'run',
    body,
    live: `/view/runs/${id}/live?after=${after}`,
    scripts: ['uPlot.iife.min.js'],
    styles: ['uPlot.min.css'],
  });
}
