import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Store } from '../src/store/store.js';
import { maxPushBytes } from '../src/view/log-tail.js';
import { jobCard } from '../src/view/run-page.js';
import { startedJob } from './helpers/jobs.js';
import { tempDir } from './helpers/sandbox.js';

/** A running training job, recorded by the store as the job manager records one, its log in `dir`. */
function runningTraining(dir: string) {
  const store = new Store(join(dir, 'store.sqlite'));
  try {
    const budget = { wallSeconds: 600, computeSeconds: 600, submissions: 5, rolloutEpisodes: 0 };
    const at = Date.now();
    store.insertRun({
      id: 'run-1',
      task_id: 'micro-gsm8k',
      label: null,
      budget: JSON.stringify(budget),
      dir,
      sandbox: 'bwrap',
      grader_version: 'v1',
      owner: '0-0',
      created_at: at,
    });
    return startedJob(store, { runId: 'run-1', logDir: dir, createdAt: at });
  } finally {
    store.close();
  }
}

describe("a running training job's card", () => {
  it('shows in its tail the last step its curve has, and its live tail goes on from the end of both', async () => {
    // More log than one push shows, in lines with characters of three and four bytes, and a line still being written.
    const lines = Array.from({ length: 1500 }, (_, i) => `step ${i + 1}/1500 loss ${(3 / (i + 1)).toFixed(4)} ✓ 🙂`);
    const whole = lines.map((line) => `${line}\n`).join('');
    const job = runningTraining(tempDir('job-card'));
    writeFileSync(job.log_path, `${whole}step 1501/1500 loss 0.00`);

    const { html, offset } = await jobCard(job);
    expect(offset).toBe(Buffer.byteLength(whole));
    const curve = JSON.parse(/data-curve="([^"]*)"/.exec(html)![1]!.replaceAll('&quot;', '"')) as Array<[number, number]>;
    expect(curve.map(([step]) => step)).toEqual(lines.map((_, i) => i + 1));
    const tail = /<pre class="log"[^>]*>([\s\S]*)<\/pre>/.exec(html)![1]!;
    expect(tail.startsWith('… earlier output not shown\nstep ')).toBe(true);
    expect(tail.endsWith(`${lines.at(-1)}\n`)).toBe(true);
    expect(Buffer.byteLength(tail)).toBeLessThanOrEqual(maxPushBytes + 64);
  });
});
