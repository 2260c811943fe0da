import { formatDuration } from '../util/duration.js';
import type { BudgetLine } from './data.js';

/** The view's HTML building blocks: escaping, the page frame every page shares, and the small formats. */

export const escapeHtml = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** An escaped text, or a dash for nothing. */
export const cell = (text: string | number | null | undefined): string =>
  text === null || text === undefined || text === '' ? '–' : escapeHtml(String(text));

export const score = (x: number | null | undefined): string => (x === null || x === undefined ? '–' : x.toFixed(2));

export const clock = (at: number): string => new Date(at).toISOString().slice(11, 19);

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;

function amount(line: BudgetLine, value: number): string {
  if (line.name === 'wall' || line.name === 'compute') return formatDuration(Math.round(value));
  if (line.name === 'disk') return mib(value);
  return String(Math.round(value));
}

/** A budget line as a labelled meter: readable without colour, and by a screen reader. */
export function budgetBar(line: BudgetLine): string {
  if (line.limit === null) return `<div class="budget"><span>${line.name}</span><span class="muted">measuring…</span></div>`;
  const share = line.limit > 0 ? Math.min(1, line.used / line.limit) : 0;
  const text = `${amount(line, line.used)} / ${amount(line, line.limit)}`;
  return (
    `<div class="budget${share >= 0.9 ? ' high' : ''}"><span>${line.name}</span>` +
    `<meter min="0" max="1" value="${share.toFixed(3)}" aria-label="${line.name} used: ${escapeHtml(text)}"></meter>` +
    `<span class="amount">${escapeHtml(text)}</span></div>`
  );
}

export interface PageFrame {
  title: string;
  /** Which navigation entry is current. */
  current: 'runs' | 'leaderboard' | 'run';
  body: string;
  /** Where the page's live stream is, with the event id it starts after; none for a page that does not update. */
  live?: string;
  /** Scripts the page needs besides the view's own, under /view/assets/. */
  scripts?: string[];
  styles?: string[];
}

export function page(frame: PageFrame): string {
  const nav = (href: string, name: string, key: PageFrame['current']) =>
    `<a href="${href}"${frame.current === key ? ' aria-current="page"' : ''}>${name}</a>`;
  const styles = ['view.css', ...(frame.styles ?? [])].map((s) => `<link rel="stylesheet" href="/view/assets/${s}">`).join('');
  const scripts = ['clean-url.js', ...(frame.scripts ?? []), 'view.js']
    .map((s) => `<script src="/view/assets/${s}" defer></script>`)
    .join('');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(frame.title)} · a2rl view</title>${styles}${scripts}</head>
<body${frame.live ? ` data-live="${escapeHtml(frame.live)}"` : ''}>
<a class="skip" href="#main">Skip to content</a>
<header><span class="brand">a2rl view</span><nav aria-label="Pages">${nav('/view', 'Runs', 'runs')}${nav('/view/leaderboard', 'Leaderboard', 'leaderboard')}</nav>
<span id="live-state" class="muted" role="status" aria-live="polite"></span></header>
<main id="main">${frame.body}</main></body></html>
`;
}
