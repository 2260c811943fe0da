import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { cliEntry, tasksRoot } from '../../src/util/paths.js';
import { fullTierPython, writeFixtureHub } from '../helpers/fixture-hub.js';
import { call } from '../helpers/mcp.js';
import { tempDir } from '../helpers/sandbox.js';
import { runToEnd } from './harness.js';

/*
 * What the red-team tests of a full task's hidden evaluation data (alfworld, webshop, deepsearchqa) share: a prepared
 * task with its fixture's tiny model, the hidden files' hashes, and a scan of the whole sandbox run by the agent's own
 * code. Each test keeps what it proves (the paths, the scan's findings, the episodes) in its own file.
 */

export const sha256 = (content: Buffer | string) => createHash('sha256').update(content).digest('hex');

/** Every file under a folder, with its size and sha256. */
export function filesUnder(dir: string): Array<{ path: string; size: number; sha256: string }> {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((name) => join(dir, name))
    .filter((path) => statSync(path).isFile())
    .map((path) => {
      const content = readFileSync(path);
      return { path, size: content.length, sha256: sha256(content) };
    });
}

/**
 * The environment of the fixtures' Python, which trains the tiny models: torch on one thread. Its default pool, a thread
 * a core, spins against whatever else runs (CI runs two test files at once): on 2 busy cores the deepsearchqa tiny model
 * took 134 CPU-s so, 16 on one thread.
 */
const fixtureEnv = { ...process.env, OMP_NUM_THREADS: '1' };

/** Runs a Python expression over tasks/hflm-tests/fixture_smoke_<task>.py (as `f`) with the full tier's Python; returns its last line of output. */
export function smokeFixture(task: string, expression: string, ...args: string[]): string {
  const script = `import sys; sys.path.insert(0, sys.argv[1]); import fixture_smoke_${task} as f; print(${expression})`;
  const out = execFileSync(fullTierPython, ['-c', script, join(tasksRoot, 'hflm-tests'), ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
    env: fixtureEnv,
  });
  return out.trim().split('\n').at(-1)!;
}

/** Each task's fixture hub with its tiny model, written once per test file (the model is trained, not drawn). */
const tinyHubs = new Map<string, { hub: string; modelId: string }>();

/**
 * Prepares the task into a new home from the fixture hub, with the task's smoke fixture's tiny model as the base (it
 * knows the task's words and ends an episode at once: a random one writes hundreds of tokens a step).
 */
export function prepareWithTinyModel(task: string, homeLabel = `${task}-redteam`) {
  const home = tempDir(homeLabel);
  let tiny = tinyHubs.get(task);
  if (!tiny) {
    const hub = writeFixtureHub();
    tiny = { hub, modelId: smokeFixture(task, 'f.write_tiny_model(sys.argv[2])', hub) };
    tinyHubs.set(task, tiny);
  }
  const { hub, modelId } = tiny;
  const prepared = spawnSync('node', [cliEntry, '--home', home, 'prepare', task, '--from', hub, '--model', modelId], { encoding: 'utf8' });
  expect(prepared.status, prepared.stderr).toBe(0);
  return { home, modelId, evalDir: join(home, 'assets', task, 'eval') };
}

/** One field of every row of the hidden halves (public.jsonl and private.jsonl under the task's eval folder). */
export function hiddenRows(evalDir: string, field: string): string[] {
  return ['public', 'private'].flatMap((half) =>
    readFileSync(join(evalDir, `${half}.jsonl`), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line)[field] as string),
  );
}

/**
 * What the sandbox scan looks for: files of these sizes and hashes anywhere; folders of these names; files of 5 MiB or
 * less, changed since `texts.changedSince`, holding any of `texts.values`; workspace files with a line or a " [SEP] "
 * or JSON string piece of one of `textHashes`' sha256 (so the texts themselves never enter the sandbox).
 */
export interface ScanSpec {
  hashes: string[];
  sizes: number[];
  names?: string[];
  /**
   * `changedSince`, epoch seconds: the texts are looked for only in files whose status changed since (st_ctime, which
   * no copy, link or touch sets back). Take it from before the texts were first written: an older file cannot hold
   * them but as a whole copy of an earlier run's file, which the hash search finds. Reading all of the host's /usr and
   * the venv for them (3.7 GB, none of it written by a run) took over 120 s on a loaded CI machine.
   */
  texts?: { values: string[]; changedSince: number };
  textHashes?: string[];
}

const scanScript = `
import hashlib, json, os, re, sys
spec = json.load(open(sys.argv[1]))
hashes, sizes, names = set(spec["hashes"]), set(spec["sizes"]), set(spec.get("names", []))
wanted = spec.get("texts", {"values": [], "changedSince": 0})
texts, texts_since = [t.encode() for t in wanted["values"]], wanted["changedSince"]
text_hashes = set(spec.get("textHashes", []))
found = {"hash": [], "name": [], "text": [], "scanned": 0}
digest = lambda s: hashlib.sha256(s.encode("utf-8")).hexdigest()
for root, dirs, files in os.walk("/", onerror=lambda e: None):
    if root == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
    found["name"] += [os.path.join(root, d) for d in dirs if d in names]
    for name in files:
        path = os.path.join(root, name)
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        found["scanned"] += 1
        try:
            status = os.stat(path)
            size = status.st_size
            if size in sizes and hashlib.sha256(open(path, "rb").read()).hexdigest() in hashes:
                found["hash"].append(path)
            if texts and size <= 5 * 2**20 and status.st_ctime >= texts_since:
                content = open(path, "rb").read()
                if any(t in content for t in texts):
                    found["text"].append(path)
            if text_hashes and path.startswith("/workspace/") and size < 50_000_000:
                pieces = re.split(r'["\\n]| \\[SEP\\] |\\\\n', open(path, encoding="utf-8", errors="replace").read())
                if any(digest(p) in text_hashes for p in pieces):
                    found["text"].append(path)
        except OSError:
            pass
print(json.dumps(found))
`;

/**
 * Walks the sandbox's whole file tree from inside (as the agent's code would) for what the spec names; returns the
 * paths found of each kind and how many files were read. The spec is written to code/spec.json, in the workspace.
 */
export async function scanSandbox(
  client: Client,
  spec: ScanSpec,
): Promise<{ hash: string[]; name: string[]; text: string[]; scanned: number }> {
  await call(client, 'write_file', { path: 'code/spec.json', content: JSON.stringify(spec) });
  await call(client, 'write_file', { path: 'code/scan.py', content: scanScript });
  // A job, not an exec: walking the runtime's many files can take longer than an exec's 45 s on a busy host.
  await runToEnd(client, 'python3 code/scan.py code/spec.json > code/found.json');
  return JSON.parse((await call(client, 'read_file', { path: 'code/found.json' })).structured.content as string);
}
