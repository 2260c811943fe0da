import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Store } from '../src/store/store.js';
import { startInProcess } from './helpers/in-process.js';
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
});
