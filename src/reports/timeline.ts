import { formatDuration } from '../util/duration.js';
import { runTranscript } from '../transcripts/run-usage.js';
import { bareToolName, type TranscriptStep } from '../transcripts/transcript.js';
import type { Store } from '../store/store.js';
import type { RunEvent } from './analysis.js';
import { escapeHtml } from './html.js';
import { jobId } from '../core/job-ids.js';

/**
 * One run as one timeline: what the agent said and thought (from its CLI's transcript),
 * the tool calls, jobs, submissions and scores (from the server's record), in time order.
 * Not every transcript has a clock (Codex's has none; Claude Code's and Gemini CLI's steps carry times): its tool
 * calls are matched in order to the calls the server recorded, and its other steps placed at their own time where
 * they have one, else between those calls.
 * Bounded: a run of any length gives a report of at most `timelineLimits` entries and text.
 */

export type TimelineKind = 'prompt' | 'message' | 'reasoning' | 'tool' | 'job' | 'submission' | 'score' | 'rollouts' | 'run';

export interface TimelineEntry {
  /** Run-relative seconds. */
  t_s: number;
  kind: TimelineKind;
  title: string;
  text: string;
  error: boolean;
  /** Where it was read: the server's record, or the agent's transcript (what the server never saw). */
  source: 'events' | 'transcript';
}

export interface Timeline {
  entries: TimelineEntry[];
  /** Where the agent's messages came from, or why there are none. */
  transcript: string;
  /** What was left out to keep the report bounded; null when nothing was. */
  cut: string | null;
}

export const timelineLimits = {
  /** Entries shown: the first and last halves of a longer timeline. */
  entries: 2000,
  /** Characters of one entry's text. */
  textChars: 1200,
  /** Characters of a tool call's arguments and answer: whole for any usual call, shown folded when long. */
  toolTextChars: 16_000,
};

/** A tool entry's text longer than this is folded (`<details>`), its start shown. */
const foldChars = 240;

/** What the timeline is built from: the run's events, and its transcript's steps where one was read. */
export interface TimelineSources {
  events: RunEvent[];
  transcript?: { agent: string; steps: TranscriptStep[] };
  /** The run's start (epoch ms), to place steps that carry their own time. */
  createdAt?: number;
  /** Where the transcript came from, or why there is none, for the reader. */
  note: string;
  /** Each job's id as the agent and the view show it (src/core/job-ids.ts), by the store's id. */
  jobIds: Record<number, string>;
}

const failedJobStates = new Set(['failed', 'timed_out', 'oom_killed', 'budget_stopped', 'lost']);
const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
const compact = (value: unknown) => (typeof value === 'string' ? value : JSON.stringify(value ?? null));

function fromToolEvent(event: RunEvent): TimelineEntry {
  const d = event.data;
  const lines = [`arguments: ${compact(d.arguments ?? {})}`];
  if (d.error !== undefined) lines.push(`error: ${compact(d.error)}`);
  else if (d.result !== undefined) lines.push(`result: ${compact(d.result)}`);
  return {
    t_s: Math.max(0, event.t_rel_ms - num(d.duration_ms)) / 1000,
    kind: 'tool',
    title: event.name,
    text: lines.join('\n'),
    error: d.error !== undefined,
    source: 'events',
  };
}

/** An event of the record as an entry; undefined for those a reader of the timeline does not need (samples, snapshots). */
function fromEvent(event: RunEvent, jobIds: Record<number, string>): TimelineEntry | undefined {
  const d = event.data;
  // A job the store no longer lists is named by the store's id, never in the form of a job's number in its run.
  const job = jobIds[num(d.job_id)] ?? `store job ${num(d.job_id)}`;
  const entry = (kind: TimelineKind, title: string, text = '', error = false): TimelineEntry => ({
    t_s: event.t_rel_ms / 1000,
    kind,
    title,
    text,
    error,
    source: 'events',
  });
  const key = `${event.kind}/${event.name}`;
  switch (key) {
    case 'job/started':
      return entry('job', `${job} ${String(d.kind)} started`, String(d.command ?? ''));
    case 'job/finished':
      return entry(
        'job',
        `${job} ${String(d.kind)} ${String(d.state)}`,
        `exit code ${d.exit_code ?? '–'}, ${num(d.cpu_s).toFixed(1)} CPU s${num(d.gpu_s) > 0 ? `, ${num(d.gpu_s).toFixed(1)} GPU s` : ''}` +
          (typeof d.episodes_done === 'number' ? `, ${d.episodes_done} episodes` : ''),
        failedJobStates.has(String(d.state)),
      );
    case 'submission/queued':
      return entry('submission', `sub-${num(d.submission_id)} submitted`, String(d.path ?? ''));
    case 'submission/graded':
      return entry('score', `sub-${num(d.submission_id)} scored ${compact(d.public_score)} public, ${compact(d.private_score)} private`);
    case 'submission/failed':
      return entry('score', `sub-${num(d.submission_id)} grading failed`, compact(d.error ?? ''), true);
    case 'rollouts/batch':
      return entry(
        'rollouts',
        `rollouts: ${num(d.episodes)} episodes`,
        `mean reward ${d.mean_reward ?? '–'}, ${String(d.out ?? '')}${d.checkpoint ? ` from ${String(d.checkpoint)}` : ''}`,
      );
    case 'run/ended':
      return entry('run', 'run ended', compact(d.reason ?? ''));
    case 'agent/launched':
      return entry('run', 'agent launched', `${compact(d.agent)}${d.driver_model ? ` (${compact(d.driver_model)})` : ''}`);
    case 'agent/exited':
      return entry('run', 'agent exited', `exit code ${d.exit_code ?? '–'}${d.signal ? `, signal ${compact(d.signal)}` : ''}`);
    default:
      return undefined;
  }
}

/** The transcript's steps as entries, its tool calls replaced by the server's record of them. */
function fromTranscript(sources: TimelineSources, toolEvents: Map<string, RunEvent[]>, matched: Set<RunEvent>): TimelineEntry[] {
  const steps = sources.transcript?.steps ?? [];
  // Each of the agent's calls to the server is the next recorded call of that tool (an index per tool, not shift():
  // a run of many thousand calls of one tool stays linear).
  const taken = new Map<string, number>();
  const anchors = steps.map((step) => {
    if (step.kind !== 'tool_call') return undefined;
    const tool = bareToolName(step.tool ?? '');
    const next = taken.get(tool) ?? 0;
    const event = toolEvents.get(tool)?.[next];
    if (!event) return undefined;
    taken.set(tool, next + 1);
    matched.add(event);
    return event;
  });
  const pairedCalls = new Set(steps.filter((step, i) => anchors[i] && step.callId !== undefined).map((step) => step.callId));
  const firstAnchor = anchors.find((a) => a !== undefined);
  let clock = firstAnchor ? fromToolEvent(firstAnchor).t_s : 0;
  const entries: TimelineEntry[] = [];
  const unpaired = new Map<string, TimelineEntry>();
  steps.forEach((step, i) => {
    const anchor = anchors[i];
    const at = step.at && sources.createdAt !== undefined ? (Date.parse(step.at) - sources.createdAt) / 1000 : NaN;
    if (anchor) {
      entries.push(fromToolEvent(anchor));
      // What the agent says next, it says after the answer came.
      clock = anchor.t_rel_ms / 1000;
      return;
    }
    const t = Math.max(Number.isFinite(at) ? at : clock, entries.at(-1)?.t_s ?? 0);
    if (step.kind === 'tool_result') {
      if (step.callId !== undefined && pairedCalls.has(step.callId)) return;
      const call = step.callId === undefined ? undefined : unpaired.get(step.callId);
      const result = `${step.isError ? 'error' : 'result'}: ${step.text ?? ''}`;
      if (call) {
        call.text += `\n${result}`;
        call.error ||= step.isError === true;
      } else
        entries.push({
          t_s: t,
          kind: 'tool',
          title: `${step.tool ?? 'tool'} result`,
          text: result,
          error: step.isError === true,
          source: 'transcript',
        });
      return;
    }
    const entry: TimelineEntry =
      step.kind === 'tool_call'
        ? {
            t_s: t,
            kind: 'tool',
            title: step.tool ?? 'tool',
            text: `arguments: ${compact(step.arguments ?? {})}`,
            error: false,
            source: 'transcript',
          }
        : {
            t_s: t,
            kind: step.source === 'user' ? 'prompt' : step.kind === 'reasoning' ? 'reasoning' : 'message',
            title: step.source === 'user' ? 'prompt' : step.kind === 'reasoning' ? 'agent reasoning' : 'agent',
            text: step.text ?? '',
            error: step.isError === true,
            source: 'transcript',
          };
    if (step.kind === 'tool_call' && step.callId !== undefined) unpaired.set(step.callId, entry);
    entries.push(entry);
  });
  return entries;
}

/** Cuts an entry's text to its kind's limit, saying how much was left out. */
const limitOf = (entry: TimelineEntry) => (entry.kind === 'tool' ? timelineLimits.toolTextChars : timelineLimits.textChars);

function bound(text: string, limit: number): string {
  return text.length <= limit ? text : `${text.slice(0, limit)} … (${text.length - limit} more characters)`;
}

/** The run's timeline, in time order and bounded. */
export function buildTimeline(sources: TimelineSources): Timeline {
  const toolEvents = new Map<string, RunEvent[]>();
  for (const event of sources.events) {
    if (event.kind !== 'tool') continue;
    const calls = toolEvents.get(event.name);
    if (calls) calls.push(event);
    else toolEvents.set(event.name, [event]);
  }
  const matched = new Set<RunEvent>();
  const told = fromTranscript(sources, toolEvents, matched);
  const recorded = sources.events
    .flatMap((event) => {
      const entry = event.kind === 'tool' ? (matched.has(event) ? undefined : fromToolEvent(event)) : fromEvent(event, sources.jobIds);
      return entry ? [entry] : [];
    })
    .map((entry, order) => ({ entry, order }))
    .sort((a, b) => a.entry.t_s - b.entry.t_s || a.order - b.order)
    .map(({ entry }) => entry);
  // Merge the two ordered lists; at equal times the record goes first (the transcript's times are the calls' ends).
  const all: TimelineEntry[] = [];
  let i = 0;
  let j = 0;
  while (i < recorded.length || j < told.length) {
    if (j >= told.length || (i < recorded.length && recorded[i]!.t_s <= told[j]!.t_s)) all.push(recorded[i++]!);
    else all.push(told[j++]!);
  }
  const limit = timelineLimits.entries;
  const left = all.length - limit;
  const kept =
    left > 0
      ? [
          ...all.slice(0, limit / 2),
          {
            t_s: all[limit / 2]!.t_s,
            kind: 'run' as const,
            title: `… ${left} entries left out here`,
            text: 'The whole record is in events.jsonl and the agent transcript.',
            error: false,
            source: 'events' as const,
          },
          ...all.slice(-limit / 2),
        ]
      : all;
  const longTexts = kept.filter((entry) => entry.text.length > limitOf(entry)).length;
  const cuts = [
    ...(left > 0 ? [`${left} of ${all.length} entries left out (the first and last ${limit / 2} are shown)`] : []),
    ...(longTexts > 0
      ? [`${longTexts} texts cut to ${timelineLimits.textChars} characters (tool calls to ${timelineLimits.toolTextChars})`]
      : []),
  ];
  return {
    entries: kept.map((entry) => ({ ...entry, t_s: Math.round(entry.t_s * 10) / 10, text: bound(entry.text, limitOf(entry)) })),
    transcript: sources.note,
    cut: cuts.length > 0 ? `${cuts.join('; ')}.` : null,
  };
}

/** The run's timeline from its record and, for a launched run, the transcript the launcher saved. */
export function loadTimeline(store: Store, runId: string, events: RunEvent[]): Timeline {
  const createdAt = store.getRun(runId)?.created_at;
  const jobIds = Object.fromEntries(store.listJobs(runId).map((job) => [job.id, jobId(job)]));
  const launched = events.find((event) => event.kind === 'agent' && event.name === 'launched');
  if (!launched) {
    return buildTimeline({
      events,
      createdAt,
      jobIds,
      note: "No agent transcript: the run was not started by a2rl run (an operator's own client), so the timeline holds the tool calls, jobs and scores the server recorded.",
    });
  }
  const transcript = runTranscript(store, runId);
  if (!transcript) {
    const path = String(launched.data.transcript ?? '');
    return buildTimeline({
      events,
      createdAt,
      jobIds,
      note: `The agent transcript ${path} could not be read; the timeline holds the server's record.`,
    });
  }
  const from = `${transcript.agent}, ${transcript.path}`;
  return buildTimeline({
    events,
    createdAt,
    jobIds,
    transcript,
    note:
      transcript.steps.length > 0
        ? `The agent's messages are from its transcript (${from}); tool calls, jobs, submissions and scores from the server's record.`
        : `The agent transcript (${from}) holds no messages the report can read; the timeline holds the server's record.`,
  });
}

export const timelineStyle = `#timeline-entries{list-style:none;padding:0;margin:.5em 0}#timeline-entries li{border-left:3px solid #ccc;padding:2px 8px;margin:4px 0}
#timeline-entries .when{color:#777;display:inline-block;min-width:4.5em}#timeline-entries .kind{font-size:11px;color:#555;text-transform:uppercase;margin-right:6px}
#timeline-entries .text{white-space:pre-wrap;font:12px/1.35 ui-monospace,monospace;margin:2px 0 0;max-height:16em;overflow:auto}
#timeline-entries .message{border-color:#36c;background:#f5f8ff}#timeline-entries .prompt{border-color:#888}#timeline-entries .reasoning{border-color:#99c}
#timeline-entries .tool{border-color:#6a6}#timeline-entries .job{border-color:#e80}#timeline-entries .submission,#timeline-entries .score{border-color:#c3c}
#timeline-entries :is(.message,.prompt,.reasoning) .text{font:13px/1.4 system-ui,sans-serif}
#timeline-entries .error{border-color:#d44;background:#fff4f4}#timeline-search{width:24em;padding:3px}
#timeline-entries summary{cursor:pointer;font:12px/1.35 ui-monospace,monospace;color:#444}`;

/**
 * The report's one script, beside it in the export as report.js (the view serves this package's copy at that path):
 * it filters the entries by the search box's words (all must appear). A file, not inline, so the view's CSP
 * (`script-src 'self'`) runs it.
 */
export const timelineScriptFile = 'report.js';
export const timelineScript = `(() => {
  const box = document.getElementById('timeline-search');
  const count = document.getElementById('timeline-count');
  const entries = [...document.querySelectorAll('#timeline-entries > li')];
  box.addEventListener('input', () => {
    const words = box.value.toLowerCase().split(/\\s+/).filter(Boolean);
    let shown = 0;
    for (const entry of entries) {
      entry.hidden = !words.every((word) => entry.textContent.toLowerCase().includes(word));
      if (!entry.hidden) shown++;
      // A match inside folded arguments is shown unfolded; clearing the search folds them again.
      for (const folded of entry.querySelectorAll('details')) folded.open = words.length > 0 && !entry.hidden;
    }
    count.textContent = words.length ? shown + ' of ' + entries.length + ' entries match' : entries.length + ' entries';
  });
})();`;

/** An entry's text; a tool call's long arguments or answer whole but folded, its start shown. */
function entryText(entry: TimelineEntry): string {
  if (!entry.text) return '';
  if (entry.kind !== 'tool' || entry.text.length <= foldChars) return `<div class="text">${escapeHtml(entry.text)}</div>`;
  return `<details><summary>${escapeHtml(entry.text.slice(0, foldChars / 2))}… (${entry.text.length} characters)</summary><div class="text">${escapeHtml(entry.text)}</div></details>`;
}

/** The timeline as a section of the HTML report: a search box over an ordered list. */
export function timelineHtml(timeline: Timeline): string {
  const items = timeline.entries.map(
    (entry) =>
      `<li class="${entry.kind}${entry.error ? ' error' : ''}" data-kind="${entry.kind}" data-source="${entry.source}"><span class="when">${formatDuration(entry.t_s)}</span><span class="kind">${entry.kind}</span><b>${escapeHtml(entry.title)}</b>${entryText(entry)}</li>`,
  );
  return `<h2 id="timeline">Timeline</h2>
<p>${escapeHtml(timeline.transcript)}${timeline.cut ? ` <b>Cut to keep the report small:</b> ${escapeHtml(timeline.cut)}` : ''}</p>
<p><input type="search" id="timeline-search" placeholder="Search messages, tool calls, jobs, scores" aria-label="Search the timeline"> <span id="timeline-count" aria-live="polite">${items.length} entries</span></p>
<ol id="timeline-entries">
${items.join('\n')}
</ol>
<script src="${timelineScriptFile}"></script>`;
}
