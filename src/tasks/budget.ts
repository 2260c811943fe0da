import { A2rlError } from '../util/errors.js';
import type { Usage } from '../store/store.js';

/** A run's limits. Compute is CPU-seconds of the agent's jobs (GPU-seconds for GPU jobs). */
export interface BudgetLimits {
  wallSeconds: number;
  computeSeconds: number;
  submissions: number;
  rolloutEpisodes: number;
}

const keys: Record<string, keyof BudgetLimits> = {
  wall: 'wallSeconds',
  compute: 'computeSeconds',
  submissions: 'submissions',
  episodes: 'rolloutEpisodes',
};
const durationKeys = new Set<keyof BudgetLimits>(['wallSeconds', 'computeSeconds']);
const unitSeconds: Record<string, number> = { s: 1, m: 60, h: 3600 };

/**
 * Parses `wall=30m,compute=20m,submissions=10,episodes=2000` over `defaults`. Durations
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
        `Cannot read budget item "${part}". Write items like wall=30m,compute=20m,submissions=10,episodes=2000 ` +
          `(keys: ${Object.keys(keys).join(', ')}; durations in s, m or h).`,
      );
    }
    const [, name, amount, unit] = match;
    if (!durationKeys.has(key) && unit !== '') {
      throw new A2rlError('INVALID_INPUT', `Budget item "${name}" is a count; write ${name}=${amount} without a unit.`);
    }
    const value = Number(amount) * (unit ? unitSeconds[unit]! : 1);
    if (!Number.isFinite(value) || value <= 0 || (!durationKeys.has(key) && !Number.isInteger(value))) {
      throw new A2rlError(
        'INVALID_INPUT',
        `Budget item "${part}" must be a positive ${durationKeys.has(key) ? 'duration' : 'whole number'}.`,
      );
    }
    limits[key] = value;
  }
  return limits;
}

export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60 ? `${String(s % 60).padStart(2, '0')}s` : ''}`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

export function formatBudget(limits: BudgetLimits): string {
  return (
    `wall=${formatDuration(limits.wallSeconds)}, compute=${formatDuration(limits.computeSeconds)}, ` +
    `submissions=${limits.submissions}, episodes=${limits.rolloutEpisodes}`
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
  exhausted: string[];
}

function line(used: number, limit: number): BudgetLine {
  const round = (x: number) => Math.round(x * 10) / 10;
  return { used: round(used), limit, left: round(Math.max(0, limit - used)) };
}

/** The ledger's view of a run: derived from the store's usage and the elapsed wall time. */
export function budgetReport(limits: BudgetLimits, usage: Usage, wallSeconds: number): BudgetReport {
  const report = {
    wall_seconds: line(wallSeconds, limits.wallSeconds),
    compute_seconds: line(usage.computeSeconds, limits.computeSeconds),
    submissions: line(usage.submissions, limits.submissions),
    rollout_episodes: line(usage.rolloutEpisodes, limits.rolloutEpisodes),
  };
  const exhausted = Object.entries(report)
    .filter(([, l]) => l.left <= 0)
    .map(([name]) => name);
  return { ...report, exhausted };
}
