import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { JobRow } from '../src/store/store.js';
import { maxPushBytes } from '../src/view/log-tail.js';
import { jobCard } from '../src/view/run-page.js';
import { tempDir } from './helpers/sandbox.js';

const training = (logPath: string): JobRow => ({
  id: 7,
  run_id: 'run-1',
  seq: 1,
  kind: 'training',
  command: 'python3 train.py',
  state: 'running',
  reason: null,
  exit_code: null,
  signal: null,
  resources: '{}',
  charged: 0,
  cpu_s: 0,
  gpu_s: 0,
  episodes_requested: 0,
  episodes_done: null,
  result: null,
  log_path: logPath,
  owner: 'agent',
  created_at: Date.now(),
  ended_at: null,
});

describe("a running training job's card", () => {
  it('shows in its tail the last step its curve has, and its live tail goes on from the end of both', async () => {
    // More log than one push shows, in lines with characters of three and four bytes, and a line still being written.
    const lines = Array.from({ length: 1500 }, (_, i) => `step ${i + 1}/1500 loss ${(3 / (i + 1)).toFixed(4)} ✓ 🙂`);
    const whole = lines.map((line) => `${line}\n`).join('');
    const path = join(tempDir('job-card'), 'log');
    writeFileSync(path, `${whole}step 1501/1500 loss 0.00`);

    const { html, offset } = await jobCard(training(path));
    expect(offset).toBe(Buffer.byteLength(whole));
    const curve = JSON.parse(/data-curve="([^"]*)"/.exec(html)![1]!.replaceAll('&quot;', '"')) as Array<[number, number]>;
    expect(curve.map(([step]) => step)).toEqual(lines.map((_, i) => i + 1));
    const tail = /<pre class="log"[^>]*>([\s\S]*)<\/pre>/.exec(html)![1]!;
    expect(tail.startsWith('… earlier output not shown\nstep ')).toBe(true);
    expect(tail.endsWith(`${lines.at(-1)}\n`)).toBe(true);
    expect(Buffer.byteLength(tail)).toBeLessThanOrEqual(maxPushBytes + 64);
  });
});
