import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { processStartTime, signalAll } from '../../sandbox/process-tree.js';

/**
 * A real Slurm cluster on this host for the tests and the bench: munged, slurmctld and two
 * slurmd daemons (`-N <prefix>1`, `-N <prefix>2`), each node with 2 fake GPUs (character devices made with
 * mknod, which gres.conf needs: count-only GPU lines drain the node). Nothing is installed
 * here: scripts/setup.sh installs slurmctld, slurmd, slurm-client and munge. Every daemon is
 * stopped by pid in `stop()`; nothing uses systemd.
 */
export interface LocalSlurm {
  /** slurm.conf: what SLURM_CONF must point at for every Slurm command. */
  conf: string;
  /** A folder every node sees (here: a local one), for `--shared-root`. */
  sharedRoot: string;
  nodes: string[];
  gpusPerNode: number;
  /** Seconds from the first daemon's start until both nodes were idle. */
  startSeconds: number;
  stop(): Promise<void>;
}

/**
 * Why a local cluster cannot start here, or undefined when it can. With A2RL_REQUIRE_SLURM=1
 * (for CI, as A2RL_REQUIRE_DOCKER) a missing cluster fails the tests instead of skipping them.
 */
export function localSlurmUnavailable(): string | undefined {
  const reason = missingForLocalSlurm();
  if (reason && process.env.A2RL_REQUIRE_SLURM === '1') throw new Error(`A2RL_REQUIRE_SLURM=1, but the Slurm tests cannot run: ${reason}`);
  return reason;
}

function missingForLocalSlurm(): string | undefined {
  if (process.getuid?.() !== 0) return 'the local Slurm cluster runs its daemons as root';
  for (const binary of ['/usr/sbin/slurmctld', '/usr/sbin/slurmd', '/usr/sbin/munged', '/usr/bin/sbatch']) {
    if (!existsSync(binary)) return `${binary} is missing; run scripts/setup.sh (installs slurmctld slurmd slurm-client munge)`;
  }
  return undefined;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function startLocalSlurm(options: { nodes?: string[]; gpusPerNode?: number; cpus?: number } = {}): Promise<LocalSlurm> {
  const unavailable = missingForLocalSlurm();
  if (unavailable) throw new Error(unavailable);
  // Node names unique to this cluster: Slurm names its cgroups after them (slurm_<node>), and two clusters
  // started on one host (two test files, a test and the bench) must never touch each other's jobs.
  const prefix = `a${randomBytes(2).toString('hex')}n`;
  const nodes = options.nodes ?? [`${prefix}1`, `${prefix}2`];
  const gpusPerNode = options.gpusPerNode ?? 2;
  // Under /tmp, whose every parent folder is o+x: munge refuses a socket under a folder others cannot reach.
  const dir = mkdtempSync('/tmp/a2rl-slurm-');
  chmodSync(dir, 0o755);
  const sharedRoot = join(dir, 'shared');
  for (const sub of ['munge', 'state', 'log', 'dev', sharedRoot]) mkdirSync(join(dir, sub), { recursive: true });
  for (const node of nodes) mkdirSync(join(dir, 'spool', node), { recursive: true });
  chmodSync(join(dir, 'munge'), 0o755);
  const key = join(dir, 'munge', 'munge.key');
  writeFileSync(key, execFileSync('head', ['-c', '1024', '/dev/urandom']), { mode: 0o400 });
  const socket = join(dir, 'munge', 'munge.socket');

  const host = hostname().split('.')[0]!;
  const cpus = options.cpus ?? 2;
  const [ctldPort, ...nodePorts] = await Promise.all([freePort(), ...nodes.map(() => freePort())]);
  const gresLines: string[] = [];
  nodes.forEach((node, n) => {
    const files: string[] = [];
    for (let g = 0; g < gpusPerNode; g++) {
      const device = join(dir, 'dev', `${node}-gpu${g}`);
      // Any character device does: Slurm only checks that File= names one.
      execFileSync('mknod', [device, 'c', '1', String(n * gpusPerNode + g + 100)]);
      files.push(device);
    }
    for (const file of files) gresLines.push(`NodeName=${node} Name=gpu File=${file}`);
  });
  const conf = join(dir, 'slurm.conf');
  writeFileSync(
    conf,
    [
      'ClusterName=a2rl',
      `SlurmctldHost=${host}`,
      `SlurmctldPort=${ctldPort}`,
      'SlurmUser=root',
      'SlurmdUser=root',
      'AuthType=auth/munge',
      `AuthInfo=socket=${socket}`,
      `StateSaveLocation=${join(dir, 'state')}`,
      // %n: each slurmd its own spool, pid and log (Slurm does not create the folders).
      `SlurmdSpoolDir=${join(dir, 'spool', '%n')}`,
      `SlurmctldPidFile=${join(dir, 'slurmctld.pid')}`,
      `SlurmdPidFile=${join(dir, 'slurmd-%n.pid')}`,
      `SlurmctldLogFile=${join(dir, 'log', 'slurmctld.log')}`,
      `SlurmdLogFile=${join(dir, 'log', 'slurmd-%n.log')}`,
      'ProctrackType=proctrack/cgroup',
      'TaskPlugin=task/cgroup,task/affinity',
      'JobAcctGatherType=jobacct_gather/cgroup',
      'JobAcctGatherFrequency=5',
      'SelectType=select/cons_tres',
      'SelectTypeParameters=CR_Core_Memory',
      // Without a default every job takes a node's whole memory, and jobs run one at a time.
      'DefMemPerCPU=256',
      'GresTypes=gpu',
      'SchedulerParameters=batch_sched_delay=0,sched_min_interval=0',
      'KillWait=2',
      'MinJobAge=300',
      'ReturnToService=2',
      'SlurmctldTimeout=30',
      'SlurmdTimeout=60',
      'MpiDefault=none',
      ...nodes.map(
        (node, i) =>
          `NodeName=${node} NodeHostname=${host} NodeAddr=127.0.0.1 Port=${nodePorts[i]} CPUs=${cpus} RealMemory=4096 Gres=gpu:${gpusPerNode} State=UNKNOWN`,
      ),
      `PartitionName=main Nodes=${nodes.join(',')} Default=YES MaxTime=INFINITE State=UP`,
      `PartitionName=grading Nodes=${nodes.join(',')} MaxTime=INFINITE State=UP`,
      '',
    ].join('\n'),
  );
  writeFileSync(
    join(dir, 'cgroup.conf'),
    ['CgroupPlugin=cgroup/v1', 'CgroupAutomount=yes', 'ConstrainCores=yes', 'ConstrainRAMSpace=yes', 'ConstrainSwapSpace=yes', ''].join(
      '\n',
    ),
  );
  writeFileSync(join(dir, 'gres.conf'), `${gresLines.join('\n')}\n`);

  const env = { ...process.env, SLURM_CONF: conf };
  const pids: number[] = [];
  const started = Date.now();
  const daemon = (argv: string[], pidFile: string) => {
    const result = spawnSync(argv[0]!, argv.slice(1), { env, encoding: 'utf8' });
    if (result.status !== 0) throw new Error(`${argv.join(' ')} failed: ${result.stderr}`);
    return pidFile;
  };
  const pidFiles = [
    daemon(
      [
        '/usr/sbin/munged',
        `--socket=${socket}`,
        `--key-file=${key}`,
        `--pid-file=${join(dir, 'munged.pid')}`,
        `--log-file=${join(dir, 'log', 'munged.log')}`,
        `--seed-file=${join(dir, 'munge', 'seed')}`,
        '--force',
      ],
      join(dir, 'munged.pid'),
    ),
  ];
  const stop = async () => {
    // Jobs first: their steps outlive a stopped slurmd.
    spawnSync('scancel', ['--full', '--signal=KILL', '--user=root'], { env });
    for (let i = 0; i < 50; i++) {
      const queue = spawnSync('squeue', ['-h', '-o', '%i'], { env, encoding: 'utf8' });
      if (queue.status !== 0 || queue.stdout.trim() === '') break;
      await sleep(100);
    }
    const live = pidFiles.flatMap((file) => (existsSync(file) ? [Number(readFileSync(file, 'utf8').trim())] : [])).concat(pids);
    signalAll(live, 'SIGTERM');
    for (let i = 0; i < 50 && live.some((pid) => processStartTime(pid) !== undefined); i++) await sleep(100);
    signalAll(
      live.filter((pid) => processStartTime(pid) !== undefined),
      'SIGKILL',
    );
    // The pids cgroups the job scripts made on these nodes (sandbox/slurm.ts); a killed job's may be left.
    for (const node of nodes) spawnSync('sh', ['-c', `rmdir /sys/fs/cgroup/pids/a2rl-slurm/${node}_job_* 2>/dev/null`]);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    // -c: a clean start, no state from a cluster before.
    pidFiles.push(daemon(['/usr/sbin/slurmctld', '-c', '-f', conf], join(dir, 'slurmctld.pid')));
    for (const node of nodes) pidFiles.push(daemon(['/usr/sbin/slurmd', '-N', node, '-f', conf], join(dir, `slurmd-${node}.pid`)));
    for (let i = 0; ; i++) {
      const info = spawnSync('sinfo', ['-h', '-N', '-o', '%N %t'], { env, encoding: 'utf8' });
      const states = [...new Set(info.stdout.trim().split('\n').filter(Boolean))];
      if (states.length === nodes.length && states.every((line) => line.endsWith(' idle'))) break;
      if (i > 300) throw new Error(`the local Slurm nodes did not become idle: ${info.stdout}${info.stderr}`);
      await sleep(100);
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { conf, sharedRoot, nodes, gpusPerNode, startSeconds: (Date.now() - started) / 1000, stop };
}
