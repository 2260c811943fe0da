import { describe, expect, it } from 'vitest';
import { progressLine, startProgress } from '../src/util/progress.js';

/** A stream that is no terminal, keeping what is written, and a clock the test moves. */
function captured() {
  const lines: string[] = [];
  let time = 1_000_000;
  return {
    lines,
    stream: { isTTY: false, write: (text: string) => lines.push(text) > 0 },
    now: () => time,
    advance: (ms: number) => (time += ms),
  };
}

describe('progress without a terminal', () => {
  it('prints a line every few seconds, never one per item, with the count, the time so far and an ETA', () => {
    const out = captured();
    const progress = startProgress('replay', 10, { stream: out.stream, now: out.now, everySeconds: 10 });
    // Items done faster than the interval: no line at all.
    for (let i = 0; i < 3; i++) {
      out.advance(2000);
      progress.tick();
    }
    expect(out.lines).toEqual([]);
    progress.note('step 4, line 7: exec');
    out.advance(4000);
    progress.tick();
    // 4 of 10 after 10 s: 2.5 s an item, 6 left.
    expect(out.lines).toEqual(['  replay: 4/10 done, 10s so far, ETA 15s; step 4, line 7: exec\n']);
    progress.note('step 5, line 9: exec');
    out.advance(9999);
    progress.tick();
    expect(out.lines).toHaveLength(1);
    out.advance(1);
    progress.tick();
    expect(out.lines[1]).toBe('  replay: 6/10 done, 20s so far, ETA 13s; step 5, line 9: exec\n');
    for (let i = 0; i < 4; i++) progress.tick();
    // The end: one last line, since lines were printed, then nothing more.
    progress.stop();
    progress.stop();
    expect(out.lines.slice(2)).toEqual(['  replay: 10/10 done, 20s so far\n']);
  });

  it('prints nothing for work shorter than the interval, and names the item under way', () => {
    const out = captured();
    const quick = startProgress('export', 100, { stream: out.stream, now: out.now, everySeconds: 10 });
    for (let i = 0; i < 100; i++) quick.tick();
    quick.stop();
    expect(out.lines).toEqual([]);
    expect(progressLine('a2rl prepare gsm8k', 0, undefined, 75_000)).toBe('  a2rl prepare gsm8k: 1m15s so far');
    // Whole minutes as budgets write them (formatDuration): 2m, not 2m00s.
    expect(progressLine('a2rl prepare gsm8k', 0, undefined, 120_000)).toBe('  a2rl prepare gsm8k: 2m so far');
    expect(progressLine('a2rl prepare gsm8k', 2, undefined, 3_725_000, 'wrote model.safetensors')).toBe(
      '  a2rl prepare gsm8k: 2 done, 1h02m so far; wrote model.safetensors',
    );
  });
});

describe('progress on a terminal', () => {
  it('clears its counting line once, however often it is stopped (a command stops it before its output and on its way out)', () => {
    const out = captured();
    const progress = startProgress('a2rl run', undefined, { stream: { ...out.stream, isTTY: true }, now: out.now });
    out.advance(2000);
    progress.stop();
    progress.stop();
    expect(out.lines).toEqual(['\r\x1b[K']);
  });
});
