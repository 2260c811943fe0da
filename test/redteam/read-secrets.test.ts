import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/util/paths.js';
import { call } from '../helpers/mcp.js';
import { tempDir } from '../helpers/sandbox.js';
import { attack, backends, recordedScores, stdioRun, waitBaseline } from './harness.js';

/** Every evaluation and grader file of every task: none of their contents may be readable by an agent. */
function secretFiles(): Array<{ path: string; size: number; sha256: string }> {
  const tasksDir = join(packageRoot, 'tasks');
  const files: Array<{ path: string; size: number; sha256: string }> = [];
  for (const task of readdirSync(tasksDir)) {
    for (const part of ['eval', 'grader']) {
      const dir = join(tasksDir, task, part);
      let names: string[];
      try {
        names = readdirSync(dir);
      } catch {
        continue;
      }
      for (const name of names) {
        const path = join(dir, name);
        if (!statSync(path).isFile()) continue;
        const content = readFileSync(path);
        files.push({ path, size: content.length, sha256: createHash('sha256').update(content).digest('hex') });
      }
    }
  }
  return files;
}

/**
 * Searches the whole sandbox as an agent would: every file whose size matches a secret
 * file is hashed, every name is compared, small files outside the system folders and
 * every process's environment and command line are searched for the canary, and the host
 * paths of the store, the package and the other run are tried.
 */
const scanScript = `
import hashlib, json, os, sys
spec = json.load(open(sys.argv[1]))
sizes = {f["size"]: f["sha256"] for f in spec["files"]}
hashes = {f["sha256"] for f in spec["files"]}
names = set(spec["names"])
canary = spec["canary_reversed"][::-1].encode()
found = {"hash": [], "name": [], "canary": [], "visible": [], "env": [], "scanned": 0}
def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
for root, dirs, files in os.walk("/", onerror=lambda e: None):
    if root == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
    for name in files:
        path = os.path.join(root, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        found["scanned"] += 1
        if name in names:
            found["name"].append(path)
        try:
            if st.st_size in sizes and sha(path) in hashes:
                found["hash"].append(path)
            if st.st_size < 4 << 20 and not root.startswith(("/usr/lib", "/usr/share", "/usr/include", "/usr/bin", "/usr/libexec")):
                with open(path, "rb") as f:
                    if canary in f.read():
                        found["canary"].append(path)
        except OSError:
            pass
for pid in os.listdir("/proc"):
    for part in ("environ", "cmdline"):
        try:
            data = open(f"/proc/{pid}/{part}", "rb").read()
        except OSError:
            continue
        if canary in data and not (part == "cmdline" and b"scan.py" in data):
            found["canary"].append(f"/proc/{pid}/{part}")
found["env"] = [k for k, v in os.environ.items() if canary.decode() in v or k.startswith("A2RL")]
for path in spec["host_paths"]:
    if os.path.exists(path):
        found["visible"].append(path)
print(json.dumps(found))
`;

describe.each(backends)('red team, reading evaluation data or grader code (%s)', (backend) => {
  const home = tempDir('rt-read');
  const canary = `canary-${Date.now()}-do-not-leak`;
  let attacker: Client;
  let victim: Client;
  let victimRun: string;
  let attackerRun: string;
  let scoresBefore: string;

  beforeAll(async () => {
    // Plant the canary where an agent must never look: the server's environment, its home, another run's workspace.
    process.env.A2RL_REDTEAM_CANARY = canary;
    writeFileSync(join(home, 'canary.txt'), canary);
    ({ client: victim, runId: victimRun } = await stdioRun(home, backend));
    await call(victim, 'write_file', { path: 'code/secret.txt', content: canary });
    ({ client: attacker, runId: attackerRun } = await stdioRun(home, backend));
    delete process.env.A2RL_REDTEAM_CANARY;
    await waitBaseline(attacker);
    scoresBefore = recordedScores(home);
  });

  afterAll(async () => {
    await attacker?.close();
    await victim?.close();
  });

  it('finds nothing by searching the whole sandbox filesystem, /proc and the environment', () =>
    attack('read-secrets', 'whole-filesystem scan', backend, async () => {
      const files = secretFiles();
      expect(files.length).toBeGreaterThan(5);
      const spec = {
        files: files.map(({ size, sha256 }) => ({ size, sha256 })),
        // Hashes find copies under any name; these names are the ones no system file shares.
        names: ['public.jsonl', 'private.jsonl', 'grade.py', 'store.sqlite', 'canary.txt'],
        canary_reversed: [...canary].reverse().join(''),
        host_paths: [home, packageRoot, join(packageRoot, 'tasks'), join(home, 'runs', victimRun), join(home, 'store.sqlite')],
      };
      await call(attacker, 'write_file', { path: 'code/scan.json', content: JSON.stringify(spec) });
      await call(attacker, 'write_file', { path: 'code/scan.py', content: scanScript });
      const scan = await call(attacker, 'exec', { command: 'python3 code/scan.py code/scan.json', timeout_s: 45 });
      expect(scan.structured.exit_code, scan.structured.output).toBe(0);
      const found = JSON.parse(scan.structured.output);
      expect(found.scanned).toBeGreaterThan(1000);
      expect(found).toMatchObject({ hash: [], name: [], canary: [], visible: [], env: [] });
    }));

  it("learns host paths from /proc/self/mountinfo but cannot follow them to another run's files or the store", () =>
    attack('read-secrets', 'symlinks to host paths from mountinfo', backend, async () => {
      const mounts = await call(attacker, 'exec', { command: 'cat /proc/self/mountinfo' });
      const victimFile = join(home, 'runs', victimRun, 'workspace', 'code', 'secret.txt');
      const made = await call(attacker, 'exec', {
        command: [
          `ln -s ${victimFile} code/victim`,
          `ln -s ${join(home, 'store.sqlite')} code/store`,
          `ln -s ${join(packageRoot, 'tasks', 'micro-gsm8k', 'eval')} code/eval`,
          'ln -s /proc/1/environ code/environ',
          `cat ${victimFile} code/victim 2>&1 | head -3`,
        ].join('; '),
      });
      expect(made.structured.output).not.toContain(canary);
      for (const path of ['code/victim', 'code/store', 'code/eval/public.jsonl', 'code/environ']) {
        const read = await call(attacker, 'read_file', { path });
        expect(read.isError, path).toBe(true);
        expect(read.text, path).toMatch(/OUTSIDE_WORKSPACE|NOT_FOUND/);
        expect(read.text).not.toContain(canary);
      }
      const listed = await call(attacker, 'list_files', { path: 'code/eval' });
      expect(listed.isError).toBe(true);
      // Whatever mountinfo names, the eval folder is not among the sandbox's mounts.
      expect(mounts.structured.output).not.toMatch(/\/eval\b/);
    }));

  it("refuses file-tool paths to the store, the package and another run's workspace", () =>
    attack('read-secrets', 'file tools outside the workspace', backend, async () => {
      const paths = [
        `../../${victimRun}/workspace/code/secret.txt`,
        '../../store.sqlite',
        '../../canary.txt',
        join(home, 'canary.txt'),
        join(packageRoot, 'tasks/micro-gsm8k/eval/public.jsonl'),
        '/workspace/../../etc/passwd',
        'code/../../instructions.md/../../store.sqlite',
        '/proc/self/environ',
      ];
      for (const path of paths) {
        const read = await call(attacker, 'read_file', { path });
        expect(read.isError, path).toBe(true);
        expect(read.text, path).toMatch(/OUTSIDE_WORKSPACE/);
        const list = await call(attacker, 'list_files', { path });
        expect(list.isError, path).toBe(true);
      }
      const submitted = await call(attacker, 'submit_artifact', { path: `../../${victimRun}/workspace/code` });
      expect(submitted.text).toMatch(/OUTSIDE_WORKSPACE/);
    }));

  it('leaves every recorded score as it was', () =>
    attack('read-secrets', 'scores untouched', backend, async () => {
      expect(recordedScores(home)).toBe(scoresBefore);
      expect(attackerRun).not.toBe(victimRun);
    }));
});
