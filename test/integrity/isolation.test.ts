import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Store } from '../../src/store/store.js';
import { cliEntry } from '../../src/util/paths.js';
import { type HttpServer, startHttpServer } from '../helpers/http-server.js';
import { call } from '../helpers/mcp.js';
import { parquetDictionaryBomb } from '../helpers/parquet-bomb.js';
import { tempDir } from '../helpers/sandbox.js';
import { connectHttp, createHttpRun } from '../redteam/harness.js';

/**
 * Files made to break a reader, written by an agent through `exec`: whatever they do to the contamination check (it
 * runs in a process of its own, src/integrity/background.ts), the server and every other run on it keep working, and
 * the attacker's run is never clean (issue 46).
 */

/**
 * Writes the bomb its argument names into output/: the 130-byte Parquet file declaring 120 M rows, a zip of 1 GiB of
 * zeros (1 MB), or a gzip stream of 10 GiB of zeros.
 */
const makeBomb = (parquet: Buffer) => `
import base64, os, struct, sys, zlib
os.makedirs('output', exist_ok=True)
zeros = b'\\0' * (1 << 20)
if sys.argv[1] == 'parquet':
    open('output/bomb.parquet', 'wb').write(base64.b64decode('${parquet.toString('base64')}'))
elif sys.argv[1] == 'zip':
    # One member of 1 GiB of zeros, deflated as the gzip below is; the archive written field by field.
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = deflate.compress(zeros) + deflate.flush(zlib.Z_FULL_FLUSH)
    block = deflate.compress(zeros) + deflate.flush(zlib.Z_FULL_FLUSH)
    data = first + block * 1023 + deflate.flush()
    crc = 0
    for _ in range(1024):
        crc = zlib.crc32(zeros, crc)
    name = b'zeros.txt'
    local = struct.pack('<IHHHHHIIIHH', 0x04034B50, 20, 0, 8, 0, 0, crc, len(data), 1 << 30, len(name), 0) + name
    central = struct.pack('<IHHHHHHIIIHHHHHII', 0x02014B50, 20, 20, 0, 8, 0, 0, crc, len(data), 1 << 30, len(name), 0, 0, 0, 0, 0, 0) + name
    end = struct.pack('<IHHHHIIH', 0x06054B50, 0, 0, 1, 1, len(central), len(local) + len(data), 0)
    open('output/bomb.zip', 'wb').write(local + data + central + end)
else:
    # A block after a full flush refers to nothing before it: one MiB of zeros compressed once, repeated 10,240 times.
    gzip = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = gzip.compress(zeros) + gzip.flush(zlib.Z_FULL_FLUSH)
    block = gzip.compress(zeros) + gzip.flush(zlib.Z_FULL_FLUSH)
    with open('output/bomb.gz', 'wb') as out:
        out.write(head)
        for _ in range(10 * 1024 - 1):
            out.write(block)
        out.write(gzip.flush())
`;

const bombs = ['parquet', 'zip', 'gzip'] as const;

describe('the contamination check cannot take the server down', () => {
  const home = tempDir('integrity-isolation');
  let server: HttpServer;
  let bystander: Client;
  const attackers = new Map<(typeof bombs)[number], { run_id: string; token: string }>();

  beforeAll(async () => {
    for (const bomb of bombs) attackers.set(bomb, await createHttpRun(home));
    const bystanderRun = await createHttpRun(home);
    server = await startHttpServer(home);
    bystander = await connectHttp(server.url, bystanderRun.token);
  }, 120_000);

  afterAll(async () => {
    await bystander?.close();
    server?.child.kill('SIGTERM');
    await server?.exited;
    rmSync(home, { recursive: true, force: true });
  });

  it('a Parquet, zip and gzip bomb each end their run not clean, while another run on the same serve --http answers throughout', async () => {
    for (const [bomb, run] of attackers) {
      const attacker = await connectHttp(server.url, run.token);
      expect((await call(attacker, 'write_file', { path: 'code/bomb.py', content: makeBomb(parquetDictionaryBomb()) })).isError).toBe(
        false,
      );
      const made = await call(attacker, 'exec', { command: `python3 code/bomb.py ${bomb}`, timeout_s: 45 });
      expect(made.structured.exit_code, made.text).toBe(0);
      await attacker.close();
    }
    for (const run of attackers.values()) {
      await promisify(execFile)(process.execPath, [cliEntry, 'runs', 'revoke', run.run_id], { env: { ...process.env, A2RL_HOME: home } });
    }

    const verdicts = () => {
      const store = new Store(join(home, 'store.sqlite'));
      try {
        return bombs.map((bomb) => store.latestIntegrityCheck(attackers.get(bomb)!.run_id, 'contamination')?.verdict);
      } finally {
        store.close();
      }
    };
    // The bystander's calls, one after another until every verdict is in: each is answered.
    let answered = 0;
    while (verdicts().some((verdict) => verdict === undefined)) {
      const budget = await call(bystander, 'budget_status');
      expect(budget.isError, budget.text).toBe(false);
      answered++;
      expect(server.child.exitCode).toBeNull();
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(answered).toBeGreaterThan(0);
    for (const verdict of verdicts()) expect(verdict).not.toBe('clean');
    expect((await call(bystander, 'budget_status')).isError).toBe(false);
    expect(server.child.exitCode).toBeNull();
  }, 600_000);
});
