import fc from 'fast-check';
import { spawnSync } from 'node:child_process';
import { closeSync, openSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CappedLog } from '../src/jobs/capped-log.js';
import { packageRoot } from '../src/util/paths.js';
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

  // /dev/full refuses every write with ENOSPC, as a full disk does: the job's output handler must not throw.
  it.each([
    ['within the cap', { headBytes: 1024, tailBytes: 1024 }],
    ['past the cap, when the kept tail is written back', { headBytes: 0, tailBytes: 0 }],
  ])('a log its disk refuses (%s) is cut once, told to its job, and takes no more output', (_, cap) => {
    const cuts: unknown[] = [];
    const log = new CappedLog('/dev/full', cap, (cut) => cuts.push(cut));
    for (let i = 0; i < 3; i++) expect(() => log.write(Buffer.from('output\n'))).not.toThrow();
    expect(() => log.close()).not.toThrow();
    expect(cuts).toEqual([{ error: 'ENOSPC', atBytes: cap.headBytes === 0 ? 21 : 0 }]);
    expect(log.cut).toEqual(cuts[0]);
  });
});

describe('server logger', () => {
  // A `serve --run`'s stderr may be a file on a full home: a line it cannot take must not end the process that logged.
  it('logs without throwing when its stderr refuses every write (/dev/full)', () => {
    const logger = pathToFileURL(join(packageRoot, 'dist', 'src', 'util', 'logger.js')).href;
    const script = `const { logger } = (await import(${JSON.stringify(logger)})).createLogger();
for (let i = 0; i < 3; i++) logger.error({ i }, 'a line stderr cannot take');
process.stdout.write('logged');`;
    const stderr = openSync('/dev/full', 'w');
    try {
      const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', stderr] });
      expect({ status: child.status, stdout: child.stdout.toString() }).toEqual({ status: 0, stdout: 'logged' });
    } finally {
      closeSync(stderr);
    }
  });
});
