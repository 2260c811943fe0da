import { createHash } from 'node:crypto';
import { mkdirSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { verifyAssets } from '../src/tasks/assets.js';
import { tempDir } from './helpers/sandbox.js';

/** The manifest `a2rl prepare` writes (hflm.assets, builder version 2). */
function writeManifest(folder: string, files: Record<string, { sha256: string; bytes: number }>): void {
  mkdirSync(folder, { recursive: true });
  writeFileSync(join(folder, 'manifest.json'), JSON.stringify({ builder_version: 2, files }));
}

/** The sha256 of `bytes` zero bytes: what a sparse file of that size holds. */
function zerosSha256(bytes: number): string {
  const hash = createHash('sha256');
  const block = Buffer.alloc(1 << 20);
  for (let left = bytes; left > 0; left -= block.length) hash.update(left >= block.length ? block : block.subarray(0, left));
  return hash.digest('hex');
}

// A full-tier run's start verifies its base model's files (a 1.5B model: 3 GB) in the server that serves it: over HTTP,
// beside other runs. Finding 10 of issue 35: hashing them synchronously held the event loop for the whole time.
describe('verifyAssets on a large model', () => {
  const home = tempDir('home-large-asset');
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it('keeps the event loop answering while it hashes a 512 MiB weights file, and still finds a changed byte', async () => {
    const bytes = 512 * 2 ** 20;
    writeManifest(join(home, 'assets', 'gsm8k'), {});
    const model = join(home, 'models', 'big--model');
    mkdirSync(model, { recursive: true });
    const weights = join(model, 'model.safetensors');
    writeFileSync(weights, '');
    truncateSync(weights, bytes); // sparse: a large file that costs no disk
    writeManifest(model, { 'model.safetensors': { sha256: zerosSha256(bytes), bytes } });

    const delay = monitorEventLoopDelay({ resolution: 5 });
    delay.enable();
    const began = performance.now();
    await verifyAssets('gsm8k', home, 'big/model');
    const wallMs = performance.now() - began;
    await sleep(20); // a loop held until now would record its stall at the next timer
    delay.disable();
    // Relative to the verification's own time, so a slower machine moves both sides: hashing in one block held it all.
    expect(delay.max / 1e6).toBeLessThan(wallMs / 10);

    writeManifest(model, { 'model.safetensors': { sha256: zerosSha256(bytes - 1), bytes } }); // another content, same size
    await expect(verifyAssets('gsm8k', home, 'big/model')).rejects.toThrow(`${weights} has changed (its sha256 is not the manifest's)`);
  });
});
