import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ContaminationDetails, recordContaminationCheck } from '../../src/integrity/check.js';
import { HiddenIndex } from '../../src/integrity/hidden-index.js';
import { readHiddenItems } from '../../src/integrity/hidden-items.js';
import { Store } from '../../src/store/store.js';
import { getTaskFile } from '../../src/tasks/task.js';
import { tasksRoot } from '../../src/util/paths.js';
import { fullTierPython } from '../helpers/fixture-hub.js';
import { parquetDictionaryBomb } from '../helpers/parquet-bomb.js';
import { call } from '../helpers/mcp.js';
import { startInProcess } from '../helpers/in-process.js';
import { evalLines, freshRun as plantedRun } from '../helpers/integrity.js';
import { tempDir } from '../helpers/sandbox.js';

// Hidden micro-gsm8k items planted in each format and place a training pipeline reads: each must be found by id and the
// run flagged. The check is called directly on a run's folder (its real code path: src/integrity/sources.ts walks the
// workspace and the recorded events); the fixtures in pickle, torch, Arrow and Parquet are written by the real
// libraries (the full tier's Python: pyarrow, torch) in one call.

const taskId = 'micro-gsm8k';
const homes: string[] = [];
afterAll(() => homes.forEach((home) => rmSync(home, { recursive: true, force: true })));

/** A fresh home (removed after the file) with one ended run of the task whose workspace is empty. */
function freshRun() {
  const home = tempDir('integrity-formats');
  homes.push(home);
  return plantedRun(taskId, home);
}

/** Writes `files` into a fresh run's workspace, runs the check, and returns its verdict and details. */
function check(files: Record<string, Buffer | string>, events: Array<{ name: string; arguments: unknown }> = []) {
  const { home, store, runId, workspace } = freshRun();
  try {
    for (const [path, content] of Object.entries(files)) {
      mkdirSync(dirname(join(workspace, path)), { recursive: true });
      writeFileSync(join(workspace, path), content);
    }
    for (const event of events)
      store.insertEvent({
        run_id: runId,
        at: Date.now(),
        t_rel_ms: 0,
        kind: 'tool',
        name: event.name,
        data: JSON.stringify({ arguments: event.arguments }),
      });
    const { verdict, details } = recordContaminationCheck(store, home, runId);
    return { verdict, details: details as ContaminationDetails };
  } finally {
    store.close();
  }
}

/** The planted items: 12 findable hidden items (10 flag a run with no decoy found: 0.5^10 < 0.001), as eval lines. */
const file = getTaskFile(taskId);
if (file.tier !== 'micro') throw new Error('a micro task');
const evalDir = join(tasksRoot, taskId, file.evalData);
const hidden = readHiddenItems(evalDir);
const index = new HiddenIndex(hidden, { n: 13, minTokens: 8, window: 64 });
index.markPublic(readFileSync(join(tasksRoot, taskId, file.trainData, 'train.jsonl'), 'utf8'));
const lines = evalLines(evalDir);
const chosen = [...index.matchable()]
  .sort((a, b) => a - b)
  .filter((_, rank) => rank % 30 === 7)
  .slice(0, 12);
const planted = chosen.map((i) => hidden[i]!.id).sort();
const jsonl = `${chosen.map((i) => lines[i]).join('\n')}\n`;
const matchedIds = (details: ContaminationDetails) => details.matched_items.map((item) => item.id).sort();

function expectFlagged(result: { verdict: string; details: ContaminationDetails }, where: RegExp): void {
  expect(matchedIds(result.details)).toEqual(planted);
  expect(result.verdict).toBe('flagged');
  for (const item of result.details.matched_items) expect(item.evidence[0]!.source.path).toMatch(where);
}

/** Fixtures written by the real libraries, from the planted JSONL. */
const fixtures = tempDir('integrity-fixtures');
homes.push(fixtures);
beforeAll(() => {
  writeFileSync(join(fixtures, 'items.jsonl'), jsonl);
  execFileSync(
    fullTierPython,
    [
      '-c',
      [
        'import bz2, io, json, lzma, pickle, sys, tarfile, zipfile',
        'import pyarrow as pa, pyarrow.feather as feather, pyarrow.parquet as pq, torch',
        'out = sys.argv[1]',
        'text = open(f"{out}/items.jsonl", "rb").read()',
        'rows = [json.loads(line) for line in text.decode().splitlines()]',
        'pickle.dump({"train": rows}, open(f"{out}/items.pkl", "wb"))',
        'pickle.dump(rows, open(f"{out}/items_p0.pkl", "wb"), protocol=0)',
        'open(f"{out}/long4.pkl", "wb").write(pickle.dumps(int.from_bytes(text, "little")))',
        'open(f"{out}/items.jsonl.xz", "wb").write(lzma.compress(text))',
        'open(f"{out}/items.jsonl.bz2", "wb").write(bz2.compress(text))',
        'torch.save({"weights": torch.zeros(64), "data": rows}, f"{out}/model.pt")',
        'table = pa.table({"question": [r["question"] for r in rows], "answer": [r["answer"] for r in rows]})',
        'with pa.ipc.new_file(f"{out}/items.arrow", table.schema) as w: w.write_table(table)',
        'feather.write_feather(table, f"{out}/items.feather")',
        'feather.write_feather(table, f"{out}/plain.feather", compression="uncompressed")',
        'feather.write_feather(table, f"{out}/zstd.feather", compression="zstd")',
        'binary = pa.table({"question": pa.array([r["question"].encode() for r in rows], pa.binary()), "answer": pa.array([r["answer"].encode() for r in rows], pa.binary())})',
        'pq.write_table(binary, f"{out}/binary.parquet")',
        'with zipfile.ZipFile(f"{out}/items.zip", "w", zipfile.ZIP_DEFLATED) as z: z.writestr("data/train.jsonl", text)',
        'with tarfile.open(f"{out}/items.tar", "w") as t:',
        '    info = tarfile.TarInfo("data/train.jsonl"); info.size = len(text); t.addfile(info, io.BytesIO(text))',
        'with tarfile.open(f"{out}/items.tar.gz", "w:gz") as t:',
        '    info = tarfile.TarInfo("train.jsonl"); info.size = len(text); t.addfile(info, io.BytesIO(text))',
        'nested = io.BytesIO()',
        'with tarfile.open(fileobj=nested, mode="w:gz") as t:',
        '    info = tarfile.TarInfo("deep/train.jsonl"); info.size = len(text); t.addfile(info, io.BytesIO(text))',
        'with zipfile.ZipFile(f"{out}/nested.zip", "w", zipfile.ZIP_STORED) as z: z.writestr("inner.tar.gz", nested.getvalue())',
        'with zipfile.ZipFile(f"{out}/bomb.zip", "w", zipfile.ZIP_DEFLATED) as z: z.writestr("zeros.bin", bytes(64 << 20))',
        // Bytes before a zip (a script, a NUL-filled header): zipfile still opens it, and reads the member.
        'open(f"{out}/prepended.bin", "wb").write(b"#!/bin/sh\\n" + bytes(9000) + open(f"{out}/items.zip", "rb").read())',
        'assert zipfile.ZipFile(f"{out}/prepended.bin").read("data/train.jsonl") == text',
        // 600 directory entries for one stored 64 KiB member: each read scans it again.
        'import struct',
        'one = io.BytesIO()',
        'with zipfile.ZipFile(one, "w", zipfile.ZIP_STORED) as z: z.writestr("m.bin", bytes(65536))',
        'one = one.getvalue(); end = one.rfind(b"PK\\x05\\x06"); size, at = struct.unpack("<II", one[end + 12:end + 20])',
        'open(f"{out}/overlap.zip", "wb").write(one[:at] + one[at:at + size] * 600 + struct.pack("<4sHHHHIIH", b"PK\\x05\\x06", 0, 0, 600, 600, size * 600, at, 0))',
      ].join('\n'),
      fixtures,
    ],
    { stdio: 'pipe' },
  );
}, 120_000);
const fixture = (name: string) => readFileSync(join(fixtures, name));

describe('the contamination check reads hidden items wherever a pipeline can read them', () => {
  it('plain JSONL (the control)', () => expectFlagged(check({ 'data/train.jsonl': jsonl }), /^data\/train\.jsonl$/));

  it('a gzip stream', () => expectFlagged(check({ 'data/train.jsonl.gz': gzipSync(jsonl) }), /^data\/train\.jsonl\.gz:gunzip$/));

  it('a zip archive', () => expectFlagged(check({ 'data.zip': fixture('items.zip') }), /^data\.zip:data\/train\.jsonl$/));

  it('a tar archive', () => expectFlagged(check({ 'data.tar': fixture('items.tar') }), /^data\.tar:data\/train\.jsonl$/));

  it('a .tar.gz', () => expectFlagged(check({ 'data.tar.gz': fixture('items.tar.gz') }), /^data\.tar\.gz:gunzip:train\.jsonl$/));

  it('a tar.gz inside a zip', () =>
    expectFlagged(check({ 'n.zip': fixture('nested.zip') }), /^n\.zip:inner\.tar\.gz:gunzip:deep\/train\.jsonl$/));

  it('a pickle (protocol 4 and protocol 0)', () => {
    expectFlagged(check({ 'cache/items.pkl': fixture('items.pkl') }), /^cache\/items\.pkl$/);
    expectFlagged(check({ 'cache/items.pkl': fixture('items_p0.pkl') }), /^cache\/items\.pkl$/);
  });

  it("a pickled integer whose bytes are the JSONL (LONG4's argument, which the opcode walk skips)", () =>
    expectFlagged(check({ 'cache/n.pkl': fixture('long4.pkl') }), /^cache\/n\.pkl$/));

  it('a zip with bytes before it (Python opens it), and a raw zlib stream', () => {
    expectFlagged(check({ 'data.bin': fixture('prepended.bin') }), /^data\.bin:data\/train\.jsonl$/);
    expectFlagged(check({ 'data.z': deflateSync(jsonl) }), /^data\.z:inflate$/);
  });

  it('xz and bzip2 streams (decoded by their commands)', () => {
    expectFlagged(check({ 'data/train.jsonl.xz': fixture('items.jsonl.xz') }), /^data\/train\.jsonl\.xz:xz$/);
    expectFlagged(check({ 'data/train.jsonl.bz2': fixture('items.jsonl.bz2') }), /^data\/train\.jsonl\.bz2:bzip2$/);
  });

  it('a torch .pt file (a zip of pickles and tensors)', () =>
    expectFlagged(check({ 'output/model.pt': fixture('model.pt') }), /^output\/model\.pt:model\/data\.pkl$/));

  it('an Arrow IPC file, and Feather files uncompressed and LZ4-compressed (its default)', () => {
    expectFlagged(check({ 'cache/items.arrow': fixture('items.arrow') }), /^cache\/items\.arrow$/);
    expectFlagged(check({ 'cache/plain.feather': fixture('plain.feather') }), /^cache\/plain\.feather$/);
    expectFlagged(check({ 'cache/items.feather': fixture('items.feather') }), /^cache\/items\.feather$/);
  });

  it('a Parquet file whose byte-array columns have no UTF8 annotation', () =>
    expectFlagged(check({ 'data/train.parquet': fixture('binary.parquet') }), /^data\/train\.parquet$/));

  it('a text file whose first byte is NUL', () =>
    expectFlagged(check({ 'notes.txt': Buffer.concat([Buffer.from([0]), Buffer.from(jsonl)]) }), /^notes\.txt$/));

  it('UTF-16 text, with a byte-order mark and without (big-endian)', () => {
    expectFlagged(check({ 'u16.txt': Buffer.from(`\ufeff${jsonl}`, 'utf16le') }), /^u16\.txt$/);
    expectFlagged(check({ 'u16be.txt': Buffer.from(jsonl, 'utf16le').swap16() }), /^u16be\.txt$/);
    // An odd byte at the end (swapping pairs threw on it, and the file went unread).
    expectFlagged(check({ 'odd.txt': Buffer.concat([Buffer.from(jsonl, 'utf16le').swap16(), Buffer.from([0x0a])]) }), /^odd\.txt$/);
  });

  it('printable runs of any other binary file', () => {
    const noise = Buffer.alloc(4096, 0xff);
    expectFlagged(check({ 'blob.bin': Buffer.concat([noise, Buffer.from(jsonl.replaceAll('\n', '\0')), noise]) }), /^blob\.bin$/);
  });

  it('items more than 256 folders deep', () => {
    const deep = `${Array.from({ length: 300 }, () => 'd').join('/')}/train.jsonl`;
    expectFlagged(check({ [deep]: jsonl }), /\/train\.jsonl$/);
  });

  it('items written only in an exec or run_training command line (a heredoc), the file deleted after', () => {
    const heredoc = (out: string) => `cat > ${out} <<'EOF'\n${jsonl}EOF\npython3 code/train.py --data ${out} && rm ${out}`;
    const half = Math.ceil(chosen.length / 2);
    const [first, second] = [jsonl.split('\n').slice(0, half).join('\n'), jsonl.split('\n').slice(half).join('\n')];
    const result = check({}, [
      { name: 'exec', arguments: { command: heredoc('/tmp/a.jsonl').replace(jsonl, `${first}\n`) } },
      { name: 'run_training', arguments: { command: heredoc('/tmp/b.jsonl').replace(jsonl, second) } },
    ]);
    expectFlagged(result, /^event \d+: (exec|run_training)$/);
    expect(result.details.coverage.command_lines).toBe(2);
  });
});

describe('every decoder bounds what it allocates by what the file can hold', () => {
  /** A refused file: the verdict is incomplete (not clean), the file listed as unread with its size and why. */
  function expectRefused(path: string, content: Buffer, reason: RegExp, member?: { name: string; bytes: number }) {
    const { verdict, details } = check({ [path]: content, 'notes.md': 'An honest note.\n' });
    expect(details.coverage.unread).toEqual([
      {
        source: { kind: 'workspace', path: member ? `${path}:${member.name}` : path },
        reason: expect.stringMatching(reason) as string,
        bytes: member?.bytes ?? content.length,
      },
    ]);
    expect(details.coverage.unread_share).toBeGreaterThan(0.5);
    // Read: notes.md, and an archive whose member was refused; a file refused whole is not counted as read.
    expect(details.coverage.files + details.coverage.binary_files).toBe(member ? 2 : 1);
    expect(verdict).toBe('incomplete');
  }

  it('the 130-byte Parquet file whose dictionary page declares 120 M rows', () => {
    expectRefused('bomb.parquet', parquetDictionaryBomb(), /declares 120000000 rows, more than its \d+ bytes can hold/);
  });

  it('a zip bomb: a member declaring 64 MiB from 64 KiB', () => {
    const zip = fixture('bomb.zip');
    const stored = zip.readUInt32LE(18); // the member's compressed size, in its local header
    expectRefused('bomb.zip', zip, /declares 67108864 bytes, past what it may expand to/, { name: 'zeros.bin', bytes: stored });
  });

  it('a zip member that inflates past the size it declares', () => {
    const zip = fixture('bomb.zip');
    // The declared size, in the central directory (offset 24 of its entry) and the local header (offset 22), made 100.
    const central = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]));
    zip.writeUInt32LE(100, central + 24);
    zip.writeUInt32LE(100, 22);
    expectRefused('liar.zip', zip, /does not inflate to its declared 100 bytes/, { name: 'zeros.bin', bytes: zip.readUInt32LE(18) });
  });

  it('a gzip stream declaring 10 GiB (its size field holds it modulo 4 GiB)', () => {
    const gz = gzipSync(jsonl);
    gz.writeUInt32LE((10 * 2 ** 30) % 2 ** 32 || 2 ** 31, gz.length - 4);
    expectRefused('big.jsonl.gz', gz, /the gzip stream declares \d+ bytes, past what it may expand to/);
  });

  it('a gzip stream that expands past its bound whatever it declares', () => {
    const gz = gzipSync(Buffer.alloc(64 << 20));
    gz.writeUInt32LE(100, gz.length - 4);
    expectRefused('zeros.gz', gz, /the gzip stream expands past what it may/);
  });

  it('an honest gzip inflating to 600 MiB, past what is held in memory, is read whole as it decodes and flagged', () => {
    // Made as pigz or `cat a.gz b.gz` make one, of many members: a sparse float32 tensor's 4 MiB (one value in 32, as
    // pruned weights are; it compresses 25 times, well inside 256, and is read by its printable runs, the cheapest scan),
    // repeated, then the planted items' member at the very end.
    const tensor = Buffer.alloc(4 * 2 ** 20);
    for (let i = 0; i < tensor.length; i += 128) tensor.writeFloatLE(Math.sin(i), i);
    const member = gzipSync(tensor);
    const gz = Buffer.concat([...Array.from({ length: (600 * 2 ** 20) / tensor.length }, () => member), gzipSync(jsonl)]);
    const result = check({ 'output/weights.bin.gz': gz });
    expectFlagged(result, /^output\/weights\.bin\.gz:gunzip$/);
    expect(result.details.coverage.unread).toEqual([]);
    expect(result.details.coverage.binary_bytes).toBeGreaterThan(600 * 2 ** 20);
  });

  it('a Feather file with zstd-compressed buffers (no decoder here) is listed as unread, not passed as clean', () => {
    expectRefused('z.feather', fixture('zstd.feather'), /zstd-compressed buffers: no decoder here/);
  });

  it('a damaged zstd stream, and an LZ4 frame (no decoder here), are listed as unread, not passed as clean', () => {
    expectRefused(
      'data.jsonl.zst',
      Buffer.concat([Buffer.from([0x28, 0xb5, 0x2f, 0xfd]), Buffer.alloc(64, 1)]),
      /the zstd stream is damaged/,
    );
    expectRefused(
      'data.jsonl.lz4',
      Buffer.concat([Buffer.from([0x04, 0x22, 0x4d, 0x18]), Buffer.alloc(64, 1)]),
      /an LZ4 frame stream: no decoder here/,
    );
  });

  it('a zip whose 600 entries are one stored member: the scans are charged, and past 256× the file the rest is refused', () => {
    const zip = fixture('overlap.zip');
    const { verdict, details } = check({ 'o.zip': zip });
    expect(details.coverage.unread[0]!.reason).toMatch(/a stored zip member of 65536 bytes would make the scan read past/);
    // What the budget allows is read, every entry after it refused (the first 200 are named; their bytes all counted).
    expect(details.coverage.unread_bytes).toBe((600 - Math.floor((zip.length * 256) / 65536)) * 65536);
    expect(verdict).toBe('incomplete');
  });

  it('a small unread file among much more read text leaves the check incomplete (no share of the bytes is room to hide in)', () => {
    const honest = 'An honest note about the training run, nothing from the evaluation set.\n'.repeat(20_000);
    const { verdict, details } = check({ 'notes.md': honest, 'tiny.zst': Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0, 0]) });
    expect(details.coverage.unread).toHaveLength(1);
    expect(details.coverage.unread_share).toBeLessThan(0.01);
    expect(verdict).toBe('incomplete');
    // Hidden items found still flag the run whatever was left unread.
    expect(check({ 'data/train.jsonl': jsonl, 'tiny.zst': Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0, 0]) }).verdict).toBe('flagged');
  });

  it('a file whose name is not UTF-8 (not read, not sized) leaves the check incomplete', () => {
    const { home, store, runId, workspace } = freshRun();
    try {
      writeFileSync(Buffer.concat([Buffer.from(`${workspace}/`), Buffer.from([0x66, 0xff, 0x2e, 0x6a])]), jsonl);
      const { verdict, details } = recordContaminationCheck(store, home, runId);
      const checked = details as ContaminationDetails;
      expect(checked.coverage).toMatchObject({ walk_cut: true, unread_share: 1 });
      expect(checked.coverage.unread).toEqual([
        { source: { kind: 'workspace', path: '.' }, reason: '1 names that are not UTF-8: not read', bytes: 0 },
      ]);
      expect(verdict).toBe('incomplete');
    } finally {
      store.close();
    }
  });

  it('a raw deflate stream inside a stored member is not mistaken for text', () => {
    // Not a format of its own: read as printable runs, a deflate stream yields no item, and nothing is unread.
    const { details } = check({ 'x.bin': deflateRawSync(jsonl) });
    expect(details.coverage.unread).toEqual([]);
    expect(details.matched).toBe(0);
  });
});

describe('a heredoc in a real exec call, the file deleted after the job read it', () => {
  it('is found in the recorded command line, and flags the run when it ends', async () => {
    const home = tempDir('integrity-heredoc');
    homes.push(home);
    const served = await startInProcess({ home, task: taskId });
    const runId = served.run.id;
    try {
      const ran = await call(served.client, 'exec', {
        command: `cat > /tmp/leak.jsonl <<'EOF'\n${jsonl}EOF\nwc -l < /tmp/leak.jsonl && rm /tmp/leak.jsonl`,
      });
      expect(ran.isError).toBe(false);
      expect(ran.text).toContain(String(chosen.length));
    } finally {
      await served.close(); // ends the run: its check runs before the engine closes
    }
    const store = new Store(join(home, 'store.sqlite'));
    try {
      const check = store.latestIntegrityCheck(runId, 'contamination')!;
      const details = JSON.parse(check.details) as ContaminationDetails;
      expect(matchedIds(details)).toEqual(planted);
      expect(details.matched_items[0]!.evidence[0]!.source).toMatchObject({
        kind: 'command',
        path: expect.stringMatching(/: exec$/) as string,
      });
      expect(check.verdict).toBe('flagged');
    } finally {
      store.close();
    }
  }, 120_000);
});
