import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Store } from '../src/store/store.js';
import { startInProcess } from './helpers/in-process.js';
import { call, tweakScript } from './helpers/mcp.js';
import { tempDir } from './helpers/sandbox.js';

describe("a stopping server's wait for gradings", () => {
  it('is bounded by its grace: a baseline still grading is recorded unsettled and left', async () => {
    const home = tempDir('grading-grace');
    // A grace no grading fits in: the baseline's grading (a sandboxed job) is still running when the run ends.
    const { run, close } = await startInProcess({ home, engine: { gradingGraceMs: 1 } });
    await close();
    const store = new Store(join(home, 'store.sqlite'));
    try {
      const unsettled = store.listEvents(run.id, 'grading').filter((event) => event.name === 'unsettled');
      expect(unsettled.map((event) => JSON.parse(event.data))).toEqual([
        { what: 'baseline', content_hash: run.task.baseModelHash, waited_ms: 1 },
      ]);
      // Left, not graded: the next run that needs the baseline grades it.
      expect(store.getGrade(run.task.id, run.task.graderVersion, run.task.baseModelHash)).toBeUndefined();
    } finally {
      store.close();
    }
  });

  it('starts no queued grading past its grace, and leaves the one it cut off unfinished, recording nothing of either', async () => {
    const home = tempDir('grading-grace-queued');
    const { engine, run, client, close } = await startInProcess({ home, engine: { gradingGraceMs: 1 } });
    // When the closing server stops grading: no grading job may start after it.
    let stoppedAt = Number.POSITIVE_INFINITY;
    const stop = engine.grader.stop.bind(engine.grader);
    engine.grader.stop = () => {
      stoppedAt = Date.now();
      stop();
    };
    // Content of its own (the base model scaled), queued behind the baseline's grading: one at a time.
    const copied = await call(client, 'exec', { command: tweakScript('output/ckpt', 0.9) });
    expect(copied.isError, copied.text).toBe(false);
    const submitted = await call(client, 'submit_artifact', { path: 'output/ckpt' });
    expect(submitted.isError, submitted.text).toBe(false);
    await close();
    const store = new Store(join(home, 'store.sqlite'));
    try {
      // Whichever grading was running (the baseline's, or the submission's where the baseline was done) was cut off;
      // none started as the stop freed its slot.
      const gradings = store.listJobs(run.id, ['grading']);
      expect(gradings.length).toBeGreaterThan(0);
      for (const job of gradings) expect(job.created_at).toBeLessThanOrEqual(stoppedAt);
      expect(gradings.at(-1)!.state).toBe('cancelled');
      // The submission is left unfinished, not failed: a later server grades it.
      expect(['queued', 'grading']).toContain(store.listSubmissions(run.id)[0]!.state);
      expect(store.listUnfinishedSubmissions().map((submission) => submission.run_id)).toEqual([run.id]);
      expect(store.listEvents(run.id, 'submission').map((event) => event.name)).not.toContain('failed');
    } finally {
      store.close();
    }
  });
});
