import { A2rlError } from '../util/errors.js';
import { formatDuration } from '../util/duration.js';
import type { Usage } from '../store/store.js';

/** A run's limits. Compute is CPU-seconds of the agent's jobs (GPU-seconds for GPU jobs). */
export interface BudgetLimits {
  wallSeconds: number;
  computeSeconds: number;
  submissions: number;
  rolloutEpisodes: number;
  /** Queries the run's sandbox may make through the search channel; absent or 0: the run has no channel. */
  searchQueries?: number;
}

const keys: Record<string, keyof BudgetLimits> = {
  wall: 'wallSeconds',
  compute: 'computeSeconds',
  submissions: 'submissions',
  episodes: 'rolloutEpisodes',
  searches: 'searchQueries',
};
const durationKeys = new Set<keyof BudgetLimits>(['wallSeconds', 'computeSeconds']);
const unitSeconds: Record<string, number> = { s: 1, m: 60, h: 3600 };

/**
 * Parses `wall=30m,compute=20m,submissions=10,episodes=2000,searches=500` over `defaults`. Durations
 * take s, m or h (a bare number is seconds); counts are whole numbers.
 */
export function parseBudget(spec: string | undefined, defaults: BudgetLimits): BudgetLimits {
  const limits = { ...defaults };
  if (spec === undefined || spec.trim() === '') return limits;
  for (const part of spec.split(',')) {
    const match = /^\s*([a-z]+)\s*=\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*$/.exec(part);
    const key = match ? keys[match[1]!] : undefined;
    if (!match || !key) {
      throw new A2rlError(
        'INVALID_INPUT',
        `Cannot read budget item "${part}". Write items like wall=30m,compute=20m,submissions=10,episodes=2000,searches=500 ` +
          `(keys: ${Object.keys(keys).join(', ')}; durations in s, m or h).`,
      );
    }
    const [, name, amount, unit] = match;
    if (!durationKeys.has(key) && unit !== '') {
      throw new A2rlError('INVALID_INPUT', `Budget item "${name}" is a count; write ${name}=${amount} without a unit.`);
    }
    const value = Number(amount) * (unit ? unitSeconds[unit]! : 1);
    // searches=0 is allowed: it takes a task's search channel away.
    const least = key === 'searchQueries' ? 0 : Number.MIN_VALUE;
    if (!Number.isFinite(value) || value < least || (!durationKeys.has(key) && !Number.isInteger(value))) {
      throw new A2rlError(
        'INVALID_INPUT',
        `Budget item "${part}" must be a ${least === 0 ? 'whole number, 0 or more' : `positive ${durationKeys.has(key) ? 'duration' : 'whole number'}`}.`,
      );
    }
    limits[key] = value;
  }
  return limits;
}

export function formatBudget(limits: BudgetLimits): string {
  return (
    `wall=${formatDuration(limits.wallSeconds)}, compute=${formatDuration(limits.computeSeconds)}, ` +
    `submissions=${limits.submissions}, episodes=${limits.rolloutEpisodes}` +
    (limits.searchQueries ? `, searches=${limits.searchQueries}` : '')
  );
}

export interface BudgetLine {
  used: number;
  limit: number;
  left: number;
}

export interface BudgetReport {
  wall_seconds: BudgetLine;
  compute_seconds: BudgetLine;
  submissions: BudgetLine;
  rollout_episodes: BudgetLine;
  /** Only for a run with a search channel (a search budget above 0). */
  search_queries?: BudgetLine;
  exhausted: string[];
}

function line(used: number, limit: number): BudgetLine {
  const round = (x: number) => Math.round(x * 10) / 10;
  return { used: round(used), limit, left: round(Math.max(0, limit - used)) };
}

/**
 * The ledger's view of a run: derived from the store's usage, the elapsed wall time and the search queries its
 * channel counted.
 */
export function budgetReport(limits: BudgetLimits, usage: Usage, wallSeconds: number, searchQueries = 0): BudgetReport {
  const report = {
    wall_seconds: line(wallSeconds, limits.wallSeconds),
    compute_seconds: line(usage.computeSeconds, limits.computeSeconds),
    submissions: line(usage.submissions, limits.submissions),
    rollout_episodes: line(usage.rolloutEpisodes, limits.rolloutEpisodes),
    ...(limits.searchQueries ? { search_queries: line(searchQueries, limits.searchQueries) } : {}),
  };
  const exhausted = Object.entries(report)
    .filter(([, l]) => l.left <= 0)
    .map(([name]) => name);
  return { ...report, exhausted };
}
