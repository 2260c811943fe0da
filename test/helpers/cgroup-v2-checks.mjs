// The cgroup v2 checks test/cgroup-v2.test.ts runs inside a pure-v2 VM (../shared/hosts/vm-run.sh), all in one boot.
// Plain JavaScript over the built dist/: under emulation vitest and tsc would each take minutes to start.
// Usage: node test/helpers/cgroup-v2-checks.mjs RESULTS.json (as root, in a cgroup standing for a delegated service's).
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BubblewrapBackend } from '../../dist/sandbox/bwrap.js';
import { cgroupsUnavailableReason } from '../../dist/sandbox/cgroup.js';

const results = {};
const owner = `v2-${process.pid}`;
/** The delegated subtree the test's command made (test/cgroup-v2.test.ts) and started this script in. */
const cgroupRoot = '/sys/fs/cgroup/svc';
const limits = { cpus: 1, memoryBytes: 256 * 2 ** 20, pids: 64, gpus: [] };

function read(dir, file) {
  try {
    return readFileSync(join(dir, file), 'utf8').trim();
  } catch (error) {
    return `unreadable: ${error.code}`;
  }
}

/**
 * Runs a shell command as a job: its status, output, usage and wall time; its cgroup's limits, read at once (they are
 * set before it starts), and its members and pids accounting, read until it exits (the cgroup goes with it).
 */
async function job(sandbox, script, jobLimits = limits) {
  const chunks = [];
  const started = Date.now();
  const tag = `v2-${Math.random().toString(36).slice(2, 8)}`;
  const process = sandbox.exec({
    command: ['/bin/sh', '-c', script],
    limits: jobLimits,
    output: { write: (chunk) => chunks.push(chunk) },
    tag,
  });
  const dir = join(cgroupRoot, 'a2rl', owner, tag);
  const files = Object.fromEntries(['cpu.max', 'memory.max', 'memory.swap.max', 'pids.max'].map((file) => [file, read(dir, file)]));
  let exited = false;
  void process.exited.then(() => (exited = true));
  for (; !exited; await new Promise((resolve) => setTimeout(resolve, 100))) {
    const [procs, peak, events] = ['cgroup.procs', 'pids.peak', 'pids.events'].map((file) => read(dir, file));
    if (procs && !procs.startsWith('unreadable'))
      Object.assign(files, { procs: files.procs ?? procs, 'pids.peak': peak, 'pids.events': events });
  }
  const status = await process.exited;
  const usage = process.usage();
  return { ...status, output: Buffer.concat(chunks).toString('utf8'), ...usage, wallSeconds: (Date.now() - started) / 1000, files };
}

try {
  // The doctor first: its lines, and --require (gpu cannot work in the VM; limits and bwrap can).
  const doctor = spawnSync(process.execPath, ['dist/src/cli/main.js', 'doctor', '--require', 'limits,bwrap,gpu'], {
    encoding: 'utf8',
    env: { ...process.env, A2RL_SHARED_ROOT: '' },
  });
  results.doctor = { status: doctor.status, stdout: doctor.stdout, stderr: doctor.stderr };
  // The doctor changed no cgroup: this script is still in the delegated one, which hands nothing down yet.
  results.afterDoctor = {
    ownCgroup: readFileSync('/proc/self/cgroup', 'utf8').trim(),
    subtreeControl: read(cgroupRoot, 'cgroup.subtree_control'),
  };

  // A cgroup nobody delegated, as an ssh session's scope: a process of someone else's (a sleep standing for the login
  // shell) beside the one that asks, the doctor's reading and the server's discovery, which must refuse and move nothing.
  const session = '/sys/fs/cgroup/session';
  mkdirSync(session);
  const shell = spawn('sleep', ['600']);
  writeFileSync(join(session, 'cgroup.procs'), String(shell.pid));
  const cgroupModule = new URL('../../dist/sandbox/cgroup.js', import.meta.url).href;
  const asked = spawnSync(
    'sh',
    [
      '-c',
      `echo $$ > ${session}/cgroup.procs && exec "$0" --input-type=module -e "$1"`,
      process.execPath,
      `const m = await import('${cgroupModule}'); console.log(JSON.stringify({ doctor: m.cgroupEnforcement(), server: m.cgroupsUnavailableReason() ?? null }));`,
    ],
    { encoding: 'utf8' },
  );
  results.undelegated = {
    ...(asked.status === 0 ? JSON.parse(asked.stdout) : { failed: asked.stderr }),
    shell: shell.pid,
    procs: read(session, 'cgroup.procs'),
    subtreeControl: read(session, 'cgroup.subtree_control'),
    children: readdirSync(session, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name),
  };
  shell.kill('SIGKILL');

  results.unavailable = cgroupsUnavailableReason() ?? null;
  results.ownCgroup = readFileSync('/proc/self/cgroup', 'utf8').trim();
  const backend = new BubblewrapBackend(owner);
  const workspace = mkdtempSync('/tmp/a2rl-v2-ws-');
  const sandbox = await backend.create({
    name: 'v2-checks',
    mounts: [{ source: workspace, target: '/workspace', readOnly: false }],
    hidden: [],
    env: {},
    workdir: '/workspace',
  });

  // Over its memory: OOM-killed, the kill counted from memory.events, its peak from memory.peak.
  results.oom = await job(sandbox, '/usr/bin/python3 -S -c "x = bytearray(300 * 2**20); print(len(x))"', {
    ...limits,
    memoryBytes: 64 * 2 ** 20,
  });

  // Two busy loops under cpu.max of one core for 4 s: charged at most one CPU-second a second.
  results.cpu = await job(sandbox, '(while :; do :; done) & (while :; do :; done) & sleep 4');

  // A fork bomb stops at pids.max (the shell gives up at the first fork refused; what it started dies with the job).
  results.forkBomb = await job(sandbox, 'i=0; while [ $i -lt 200 ]; do sleep 5 & i=$((i+1)); done', { ...limits, cpus: 1.5, pids: 32 });

  await sandbox.destroy();
  await backend.dispose();
  results.leftAfterDispose = readdirSync(join(cgroupRoot, 'a2rl'), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name);
} catch (error) {
  results.error = String(error?.stack ?? error);
}
writeFileSync(process.argv[2], JSON.stringify(results, null, 2));
