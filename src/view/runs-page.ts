import type { RunCursor, RunFilter } from '../store/store.js';
import { A2rlError } from '../util/errors.js';
import { type RunSummary, runsPerPage, type ViewData } from './data.js';
import { budgetBar, cell, clock, escapeHtml, page, score } from './html.js';

/** The runs page: runs newest first, a page of them at a time, filtered by task, agent, batch and state. */

export const runFilterKeys = ['task', 'agent', 'batch', 'state'] as const;
export type RunFilters = Partial<Record<(typeof runFilterKeys)[number], string>>;

export function runFilters(url: URL): RunFilters {
  return Object.fromEntries(runFilterKeys.flatMap((key) => (url.searchParams.get(key) ? [[key, url.searchParams.get(key)!]] : [])));
}

export function matchesFilters(run: RunSummary, filters: RunFilters): boolean {
  return (
    (filters.task === undefined || run.task === filters.task) &&
    (filters.agent === undefined || (run.agent ?? run.label ?? '') === filters.agent) &&
    (filters.batch === undefined || run.batch === filters.batch) &&
    (filters.state === undefined || run.state === filters.state)
  );
}

/** One run's row; the live stream sends it again when the run changes. */
export function runRow(run: RunSummary): string {
  const versus =
    run.best_public === null
      ? `<span class="muted">none</span> vs ${score(run.baseline_public)}`
      : `<strong>${score(run.best_public)}</strong> vs ${score(run.baseline_public)}`;
  return (
    `<tr data-run="${escapeHtml(run.id)}">` +
    `<td class="id"><a href="/view/runs/${encodeURIComponent(run.id)}">${escapeHtml(run.id)}</a><div class="muted">${clock(run.created_at)}</div></td>` +
    `<td class="nowrap">${cell(run.task)}</td><td>${cell(run.agent ?? run.label)}</td><td>${cell(run.driver_model)}</td>` +
    `<td><span class="state ${run.state}">${run.state}</span></td>` +
    `<td class="budgets">${run.budget.map(budgetBar).join('')}</td>` +
    `<td class="num">${versus}</td>` +
    `<td>${run.flags.map((flag) => `<span class="flag">${escapeHtml(flag)}</span>`).join(' ') || '–'}</td></tr>`
  );
}

function select(name: string, values: string[], chosen: string | undefined): string {
  const options = ['', ...new Set(values.filter((v) => v !== ''))].map(
    (v) => `<option value="${escapeHtml(v)}"${v === (chosen ?? '') ? ' selected' : ''}>${v === '' ? 'all' : escapeHtml(v)}</option>`,
  );
  return `<label>${name} <select name="${name}">${options.join('')}</select></label>`;
}

/** `before=<created_at>:<id>`: the page of runs older than that one; undefined for the newest. */
export function runCursor(url: URL): RunCursor | undefined {
  const before = url.searchParams.get('before');
  if (before === null) return undefined;
  const match = /^(\d+):(.+)$/.exec(before);
  if (!match) throw new A2rlError('INVALID_INPUT', `before=${before} is not <created_at>:<run id>; follow the page's "older runs" link.`);
  return { created_at: Number(match[1]), id: match[2]! };
}

/** The page's filters as the store searches them. */
function storeFilter(filters: RunFilters): RunFilter {
  if (filters.state !== undefined && filters.state !== 'active' && filters.state !== 'ended') {
    throw new A2rlError('INVALID_INPUT', `state=${filters.state} is not a run state; choose active or ended.`);
  }
  return {
    task: filters.task,
    agent: filters.agent,
    state: filters.state,
    batch: filters.batch,
  };
}

/** @param diskWarning why the home's disk is nearly full, shown above the runs; undefined while it has room. */
export function runsPage(data: ViewData, filters: RunFilters, diskWarning?: string, before?: RunCursor): string {
  const query = Object.entries(filters)
    .map(([k, v]) => `&${k}=${encodeURIComponent(v)}`)
    .join('');
  const live = `/view/live?after=${data.lastEventId()}${query}`;
  const { rows: shown, next } = data.runs(storeFilter(filters), before);
  const form =
    `<form class="filters" method="get" action="/view" aria-label="Filter runs">` +
    select('task', data.store.distinctRunValues('task'), filters.task) +
    select('agent', data.store.distinctRunValues('agent'), filters.agent) +
    select('batch', data.store.runBatches(), filters.batch) +
    select('state', ['active', 'ended'], filters.state) +
    `<button type="submit">Filter</button></form>`;
  const older = next
    ? `<p><a rel="next" href="/view?before=${next.created_at}:${encodeURIComponent(next.id)}${query}">Older runs</a></p>`
    : '';
  const body =
    `<h1>Runs</h1>${diskWarning ? `<p class="warning" role="alert">Warning: ${escapeHtml(diskWarning)}.</p>` : ''}${form}` +
    `<p class="muted">${before ? `${shown.length} runs older than the last page's` : `The ${shown.length} newest runs`}` +
    `${next ? ` (${runsPerPage} a page)` : ''}; rows update as the runs change.</p>` +
    `<div class="scroll"><table id="runs"><caption class="sr-only">Runs, newest first</caption><thead><tr>` +
    `<th scope="col">run</th><th scope="col">task</th><th scope="col">agent</th><th scope="col">driver model</th><th scope="col">state</th>` +
    `<th scope="col">budget</th><th scope="col">best public vs baseline</th><th scope="col">flags</th></tr></thead>` +
    `<tbody>${shown.map(runRow).join('\n')}</tbody></table></div>${older}`;
  return page({ title: 'Runs', current: 'runs', body, live });
}
