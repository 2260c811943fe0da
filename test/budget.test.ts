import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { budgetReport, parseBudget } from '../src/tasks/budget.js';
import { formatDuration } from '../src/util/duration.js';
import { A2rlError } from '../src/util/errors.js';

const defaults = { wallSeconds: 1200, computeSeconds: 900, submissions: 5, rolloutEpisodes: 4000 };

describe('budget', () => {
  it('parses every key and unit over the defaults', () => {
    expect(parseBudget('wall=30m,compute=1.5h,submissions=10,episodes=2000', defaults)).toEqual({
      wallSeconds: 1800,
      computeSeconds: 5400,
      submissions: 10,
      rolloutEpisodes: 2000,
    });
    expect(parseBudget('compute=90', defaults)).toEqual({ ...defaults, computeSeconds: 90 });
    expect(parseBudget(undefined, defaults)).toEqual(defaults);
  });

  it.each([
    ['walltime=3m', /Cannot read budget item "walltime=3m"/],
    ['wall=3d', /Cannot read budget item/],
    ['submissions=2m', /is a count; write submissions=2 without a unit/],
    ['episodes=0', /must be a positive whole number/],
    ['submissions=1.5', /must be a positive whole number/],
    ['wall=', /Cannot read budget item/],
  ])('refuses %s with an actionable message', (spec, message) => {
    expect(() => parseBudget(spec, defaults)).toThrow(A2rlError);
    expect(() => parseBudget(spec, defaults)).toThrow(message);
  });

  it('reads back any duration it formats', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 48 * 3600 }), (seconds) => {
        const [, h = '0', m = '0', s = '0'] = /^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/.exec(formatDuration(seconds))!;
        const back = Number(h) * 3600 + Number(m) * 60 + Number(s);
        // Hours are shown to the minute.
        return seconds >= 3600 ? Math.abs(back - seconds) < 60 : back === seconds;
      }),
    );
  });

  it('never reports a negative amount left, and names what is exhausted', () => {
    fc.assert(
      fc.property(fc.nat(5000), fc.nat(3000), fc.nat(20), fc.nat(9000), (wall, compute, submissions, episodes) => {
        const report = budgetReport(defaults, { computeSeconds: compute, submissions, rolloutEpisodes: episodes }, wall);
        const lines = [report.wall_seconds, report.compute_seconds, report.submissions, report.rollout_episodes];
        expect(lines.every((line) => line.left >= 0)).toBe(true);
        expect(report.exhausted.includes('compute_seconds')).toBe(compute >= defaults.computeSeconds);
        expect(report.exhausted.includes('submissions')).toBe(submissions >= defaults.submissions);
      }),
    );
  });
});
