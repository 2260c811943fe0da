import fc from 'fast-check';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CappedLog } from '../src/jobs/capped-log.js';
import { tempDir } from './helpers/sandbox.js';

describe('capped job log', () => {
  it('keeps everything up to the cap, then the head, a line saying what was dropped, and the newest tail', () => {
    const dir = tempDir('capped-log');
    let n = 0;
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 40 }), { maxLength: 12 }), (chunks) => {
        const cap = { headBytes: 16, tailBytes: 24 };
        const log = new CappedLog(join(dir, `log-${n++}`), cap);
        const all = Buffer.concat(chunks.map((c) => Buffer.from(c)));
        for (const chunk of chunks) {
          log.write(Buffer.from(chunk));
          // Past the cap, the file holds at most the cap and one marker line.
          expect(statSync(log.path).size).toBeLessThanOrEqual(cap.headBytes + cap.tailBytes + 200);
        }
        log.close();
        log.write(Buffer.from('after close'));
        const kept = readFileSync(log.path);
        if (all.length <= 40) {
          expect(kept.equals(all)).toBe(true);
        } else {
          const marker = Buffer.from(
            `\n[a2rl: ${all.length - 40} bytes of output dropped here; a job log keeps its first 16 and last 24 bytes]\n`,
          );
          expect(kept.equals(Buffer.concat([all.subarray(0, 16), marker, all.subarray(all.length - 24)]))).toBe(true);
        }
      }),
      // Found by a CI run: exactly the cap, then an empty chunk.
      { examples: [[[new Uint8Array(40), new Uint8Array(0)]]] },
    );
  });
});
