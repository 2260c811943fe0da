import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  accessSync,
  closeSync,
  constants,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { rm } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { A2rlError } from '../src/util/errors.js';
import { bubblewrapArgs, setprivMissingReason } from './bwrap.js';
import { giveWritableMounts } from './job-identity.js';
import type {
  ClusterScheduler,
  ExecOptions,
  ExitStatus,
  OutputSink,
  ResourceUsage,
  SandboxBackend,
  SandboxInstance,
  SandboxProcess,
  SandboxSpec,
} from './contract.js';

/** Where and how the Slurm backend submits: `--shared-root` and the partitions (QOS) of agent jobs and of grading. */
export interface SlurmSettings {
  /** A folder every node sees at the same path (NFS, Lustre; a local folder on one host): job scripts, logs, usage. */
  sharedRoot?: string;
  partition?: string;
  qos?: string;
  gradingPartition?: string;
  gradingQos?: string;
  /** slurm.conf for the Slurm commands, where not the default (`SLURM_CONF`): passed on explicitly, since agents' MCP clients may not pass the environment to their server. */
  conf?: string;
  /**
   * A job whose server has not written its heartbeat for this long ends itself (the server
   * died and no other took over): default 60 s. The nodes' clocks must agree within seconds.
   */
  orphanAfterSeconds?: number;
}

/** How often a server writes its heartbeat on the shared root while it has sandboxes. */
const heartbeatMs = 5000;

/** Job names are `a2rl.<owner>.<tag>`: a restarted server finds what a dead one left with squeue. */
const jobNamePrefix = 'a2rl.';
/** How often the queue and the jobs' files on the shared path are read. */
const pollMs = 250;
/** Longest a restarted server waits for a dead one's cancelled jobs to leave the queue before removing their folders. */
const sweepWaitMs = 15_000;
/** Slurm job states after which nothing runs any more. */
const endedStates = new Set([
  'BOOT_FAIL',
  'CANCELLED',
  'COMPLETED',
  'DEADLINE',
  'FAILED',
  'NODE_FAIL',
  'OUT_OF_MEMORY',
  'PREEMPTED',
  'TIMEOUT',
  'SPECIAL_EXIT',
  'REVOKED',
]);
/** Stands for the node's GPU device arguments in the job script: only the node knows which GPUs Slurm gave. */
const gpuDevicesWord = '\0gpu-devices';

/**
 * Slurm: every job of a run (exec, training, rollouts, grading) is a Slurm batch job whose
 * script starts the same bubblewrap sandbox on whichever node runs it. Limits become
 * `--mem`, `--cpus-per-task`, `--gres=gpu:N`, `--time`; the pids limit is a cgroup the script
 * makes on the node. The run's workspace lies on the shared root, and so does each job's
 * folder: its script, its log (streamed from there into the job's log), its usage (read from
 * the job's Slurm cgroup on the node every second: no slurmdbd needed) and its exit.
 * GPUs are Slurm's: jobs wait in its queue, not the server's.
 */
export class SlurmBackend implements SandboxBackend {
  readonly name = 'slurm';
  readonly scheduler: ClusterScheduler;
  private readonly slurm: SlurmCommands;
  private readonly queue: SlurmQueue;
  private maxGpus: number | undefined;
  private heartbeat: NodeJS.Timeout | undefined;

  constructor(
    private readonly owner: string,
    private readonly settings: SlurmSettings = {},
  ) {
    this.slurm = new SlurmCommands(settings.conf);
    this.queue = new SlurmQueue(this.slurm);
    this.scheduler = {
      maxGpusPerJob: () => (this.maxGpus ??= clusterMaxGpus(this.slurm)),
      accounting: "each Slurm job's own cgroup on its node (CPU time and peak memory, read every second into the shared root)",
    };
  }

  private get orphanAfterMs(): number {
    return (this.settings.orphanAfterSeconds ?? 60) * 1000;
  }

  /** Folder of this server's job folders on the shared root. */
  private get ownerDir(): string {
    return join(this.settings.sharedRoot!, '.a2rl-slurm', this.owner);
  }

  async unavailableReason(): Promise<string | undefined> {
    const { sharedRoot } = this.settings;
    if (!sharedRoot) return 'no shared root: give --shared-root (or A2RL_SHARED_ROOT), a folder every node sees at the same path';
    try {
      accessSync(sharedRoot, constants.W_OK);
    } catch {
      return `the shared root ${sharedRoot} is not a writable folder`;
    }
    const info = this.slurm.sync('sinfo', ['-h', '-o', '%G']);
    if (info.error) return `the Slurm client is not installed (${info.error.message}); install the Debian package slurm-client`;
    if (info.status !== 0) return `no Slurm controller answers: ${info.stderr.trim()}`;
    this.maxGpus = maxGpus(info.stdout);
    // The nodes run bwrap's command line, setpriv's path as this host has it (one system image across the cluster).
    return setprivMissingReason();
  }

  hostCheck(): string | undefined {
    return undefined;
  }

  async create(spec: SandboxSpec): Promise<SandboxInstance> {
    const sharedRoot = resolve(this.settings.sharedRoot!);
    for (const mount of spec.mounts) {
      const inside = relative(sharedRoot, resolve(mount.source));
      if (!mount.readOnly && inside.startsWith('..')) {
        throw new A2rlError(
          'SANDBOX_UNAVAILABLE',
          `The writable folder ${mount.source} is not under the shared root ${sharedRoot}, so the nodes would not see it; put --home under the shared root.`,
        );
      }
    }
    const placement = spec.grading
      ? { partition: this.settings.gradingPartition ?? this.settings.partition, qos: this.settings.gradingQos ?? this.settings.qos }
      : { partition: this.settings.partition, qos: this.settings.qos };
    // A root server's jobs run as root on the nodes until bwrap's setpriv drops them to the run's own uid (as on bwrap).
    await giveWritableMounts(spec);
    this.beat();
    return new SlurmInstance(spec, this.owner, this.ownerDir, placement, this.slurm, this.queue, this.orphanAfterMs);
  }

  /**
   * After a crash: cancels the Slurm jobs of servers that are gone and removes their folders on the shared root,
   * once those jobs have left the queue (until then slurmstepd may still write a job's output there).
   */
  async sweep(ownerAlive: (owner: string) => boolean): Promise<string[]> {
    const listed = this.slurm.sync('squeue', ['-h', '-o', '%i|%j']);
    const removed: string[] = [];
    const cancelled: string[] = [];
    for (const line of listed.status === 0 ? listed.stdout.trim().split('\n') : []) {
      const [id, name] = line.split('|');
      if (!id || !name?.startsWith(jobNamePrefix)) continue;
      const owner = name.slice(jobNamePrefix.length).split('.')[0]!;
      if (ownerAlive(owner)) continue;
      this.slurm.sync('scancel', ['--full', '--signal=KILL', id]);
      this.slurm.sync('scancel', [id]);
      cancelled.push(id);
      removed.push(`${name} (Slurm job ${id})`);
    }
    await this.whenLeftQueue(cancelled, sweepWaitMs);
    const base = join(this.settings.sharedRoot ?? '/nonexistent', '.a2rl-slurm');
    for (const owner of existsSync(base) ? readdirSync(base) : []) {
      if (ownerAlive(owner)) continue;
      // A job still finishing may add a file while the folder goes: it is left for the next start, never fatal to this one.
      await rm(join(base, owner), { recursive: true, force: true, maxRetries: 3 }).catch((error: Error) =>
        removed.push(`${join(base, owner)} left for the next start: ${error.message}`),
      );
    }
    return removed;
  }

  /** Waits (at most `ms`) until none of the jobs is pending, running or completing. */
  private async whenLeftQueue(jobIds: string[], ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    while (jobIds.length > 0 && Date.now() < deadline) {
      const { error, stdout } = await this.slurm.run('squeue', ['-h', '-j', jobIds.join(','), '-o', '%i']);
      // squeue fails on ids it no longer knows: those jobs are gone.
      if (error || stdout.trim() === '') return;
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  }

  /**
   * Writes the time into `<owner dir>/alive` now and every few seconds: the jobs' scripts end
   * their job when it grows stale. Written in place, not renamed: NFS clients may cache a
   * renamed file's old name for up to a minute; an empty read (mid-write) counts as fresh.
   */
  private beat(): void {
    if (this.heartbeat) return;
    const write = () => {
      mkdirSync(this.ownerDir, { recursive: true });
      writeFileSync(join(this.ownerDir, 'alive'), String(Date.now()));
    };
    write();
    this.heartbeat = setInterval(write, Math.min(heartbeatMs, this.orphanAfterMs / 3));
    this.heartbeat.unref();
  }

  async dispose(): Promise<void> {
    clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    this.queue.close();
    rmSync(this.ownerDir, { recursive: true, force: true });
  }
}

/** The most GPUs any node has, from `sinfo -o %G` lines such as `gpu:2` or `gpu:a100:4(S:0)`. */
function maxGpus(gres: string): number {
  let most = 0;
  for (const item of gres.split(/[\n,]/)) {
    const match = /^gpu(?::[^:(]+)?:(\d+)/.exec(item.trim());
    if (match) most = Math.max(most, Number(match[1]));
  }
  return most;
}

function clusterMaxGpus(slurm: SlurmCommands): number {
  const info = slurm.sync('sinfo', ['-h', '-o', '%G']);
  return info.status === 0 ? maxGpus(info.stdout) : 0;
}

/** The Slurm commands, run with the configured slurm.conf. */
class SlurmCommands {
  private readonly env: NodeJS.ProcessEnv;

  constructor(conf: string | undefined) {
    this.env = conf ? { ...process.env, SLURM_CONF: conf } : process.env;
  }

  sync(command: string, args: string[]) {
    return spawnSync(command, args, { encoding: 'utf8', env: this.env });
  }

  run(command: string, args: string[]): Promise<{ error: Error | null; stdout: string; stderr: string }> {
    return new Promise((resolve) =>
      execFile(command, args, { env: this.env, maxBuffer: 16 << 20 }, (error, stdout, stderr) => resolve({ error, stdout, stderr })),
    );
  }
}

interface QueueEntry {
  state: string;
  reason: string;
}

/**
 * One `squeue` for all of a server's jobs every {@link pollMs}, not one per job: what each
 * job's state is, why it still pends. Jobs that finished stay listed for MinJobAge (300 s by
 * default); one no longer listed has ended. On an error (the controller does not answer) no
 * job changes state, and each still looks for its exit file.
 */
class SlurmQueue {
  private readonly watched = new Map<string, (entry: QueueEntry | undefined) => void>();
  private timer: NodeJS.Timeout | undefined;
  private polling = false;

  constructor(private readonly slurm: SlurmCommands) {}

  watch(jobId: string, onPoll: (entry: QueueEntry | undefined) => void): void {
    this.watched.set(jobId, onPoll);
    this.timer ??= setInterval(() => this.poll(), pollMs);
  }

  unwatch(jobId: string): void {
    this.watched.delete(jobId);
    if (this.watched.size === 0) this.close();
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private poll(): void {
    if (this.polling || this.watched.size === 0) return;
    this.polling = true;
    const ids = [...this.watched.keys()];
    // All of this user's jobs rather than `-j <ids>`: one id the controller has forgotten would fail the whole list.
    void this.slurm.run('squeue', ['-h', '-t', 'all', '--me', '-o', '%i|%T|%r']).then(({ error, stdout }) => {
      this.polling = false;
      const entries = new Map<string, QueueEntry>();
      if (!error) {
        for (const line of stdout.trim().split('\n')) {
          const [id, state, reason] = line.split('|');
          if (id && state) entries.set(id, { state, reason: reason ?? '' });
        }
      }
      for (const id of ids) this.watched.get(id)?.(error ? undefined : (entries.get(id) ?? { state: 'GONE', reason: '' }));
    });
  }
}

class SlurmInstance implements SandboxInstance {
  private readonly running = new Set<SlurmProcess>();

  constructor(
    readonly spec: SandboxSpec,
    private readonly owner: string,
    private readonly ownerDir: string,
    private readonly placement: { partition?: string; qos?: string },
    private readonly slurm: SlurmCommands,
    private readonly queue: SlurmQueue,
    private readonly orphanAfterMs: number,
  ) {}

  exec(options: ExecOptions): SandboxProcess {
    const dir = join(this.ownerDir, `${options.tag}-${randomBytes(3).toString('hex')}`);
    mkdirSync(dir, { recursive: true });
    const gpuCount = options.gpuCount ?? 0;
    const bwrap = bubblewrapArgs(this.spec, options, { count: gpuCount, args: gpuCount > 0 ? [gpuDevicesWord] : [] });
    writeFileSync(
      join(dir, 'job.sh'),
      jobScript(dir, bwrap, options.limits.pids, { file: join(this.ownerDir, 'alive'), staleMs: this.orphanAfterMs }),
      { mode: 0o700 },
    );
    const capture = 'captureBytes' in options.output ? options.output.captureBytes : undefined;
    const sbatch = [
      '--parsable',
      `--job-name=${jobNamePrefix}${this.owner}.${options.tag}`,
      `--comment=a2rl owner=${this.owner} sandbox=${this.spec.name}`,
      `--chdir=${dir}`,
      `--output=${join(dir, 'log')}`,
      `--error=${capture === undefined ? join(dir, 'log') : '/dev/null'}`,
      '--nodes=1',
      '--ntasks=1',
      `--cpus-per-task=${Math.max(1, Math.ceil(options.limits.cpus))}`,
      `--mem=${Math.max(1, Math.ceil(options.limits.memoryBytes / 2 ** 20))}M`,
      '--no-requeue',
      // Whole minutes, one more than the job's own limit: the job manager stops it first, Slurm only if the server is gone.
      ...(options.timeoutMs !== undefined ? [`--time=${Math.ceil(options.timeoutMs / 60_000) + 1}`] : []),
      ...(gpuCount > 0 ? [`--gres=gpu:${gpuCount}`] : []),
      ...(this.placement.partition ? [`--partition=${this.placement.partition}`] : []),
      ...(this.placement.qos ? [`--qos=${this.placement.qos}`] : []),
      join(dir, 'job.sh'),
    ];
    const job = new SlurmProcess(dir, sbatch, options.output, this.slurm, this.queue);
    this.running.add(job);
    void job.exited.then(() => this.running.delete(job));
    return job;
  }

  async destroy(): Promise<void> {
    await Promise.all([...this.running].map((job) => job.stop(2000)));
  }
}

function shellWord(word: string): string {
  if (word === gpuDevicesWord) return '$gpu_devices';
  if (word.includes('\0')) throw new Error('a job argument holds a NUL byte');
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * The batch script: on the node, the job's usage is read from its Slurm cgroup (v1 or v2)
 * into `usage` every second; bwrap runs in a pids cgroup of its own where one can be made;
 * TERM from the server (`scancel --batch`) goes to the job's own processes, not to bwrap,
 * so bwrap reports how the job ended (bwrap dies on TERM, and its sandbox with it); USR1
 * kills everything, and so does the script itself once the server's heartbeat is stale
 * (the server died and none took over); at the end `exit` holds the status and final usage.
 */
function jobScript(dir: string, bwrap: string[], pids: number, heartbeat: { file: string; staleMs: number }): string {
  return `#!/bin/sh
dir=${shellWord(dir)}
alive=${shellWord(heartbeat.file)}
PATH=/usr/local/bin:/usr/bin:/bin; export PATH
# When it began to run (ms since the epoch): GPU time counts from here, however long it pended.
echo $(($(date +%s%N) / 1000000)) > "$dir/started"
# Where a cgroup controller is mounted (v1), or the unified hierarchy (v2).
mnt() { awk -v c="$1" '{ for (i = 7; $i != "-"; i++); if ($(i+1) == "cgroup2" && c == "unified") { print $5; exit } if ($(i+1) != "cgroup") next; n = split($(i+3), o, ","); for (j = 1; j <= n; j++) if (o[j] == c) { print $5; exit } }' /proc/self/mountinfo; }
own() { awk -F: -v c="$1" '{ n = split($2, a, ","); for (i = 1; i <= n; i++) if (a[i] == c) print $3; if (c == "" && $1 == "0") print $3 }' /proc/self/cgroup; }
if [ -n "$(mnt cpuacct)" ]; then
  procs=$(mnt cpuacct)$(own cpuacct)/cgroup.procs
  cpu_dir=$(mnt cpuacct)$(own cpuacct); cpu_dir=\${cpu_dir%%/step_*}
  mem_leaf=$(mnt memory)$(own memory); mem_dir=\${mem_leaf%%/step_*}
else
  v2=$(mnt unified)$(own ""); procs=$v2/cgroup.procs; v2=\${v2%%/step_*}
fi
usage() {
  if [ -n "$v2" ]; then
    cpu=$(awk '$1 == "usage_usec" { printf "%d", $2 * 1000 }' "$v2/cpu.stat"); cur=$(cat "$v2/memory.current")
    peak=$(cat "$v2/memory.peak" 2>/dev/null || echo "$cur"); oom=$(awk '$1 == "oom_kill" { print $2 }' "$v2/memory.events")
  else
    cpu=$(cat "$cpu_dir/cpuacct.usage"); cur=$(cat "$mem_dir/memory.usage_in_bytes")
    peak=$(cat "$mem_dir/memory.max_usage_in_bytes")
    # The kill is counted where the limit was hit: the job's, or its step's.
    oom=0; d=$mem_leaf
    while [ -n "$d" ]; do
      n=$(awk '$1 == "oom_kill" { print $2 }' "$d/memory.oom_control"); oom=$((oom + \${n:-0}))
      case \${d##*/} in job_*) break ;; esac; d=\${d%/*}
    done
  fi
  echo "\${cpu:-0} \${peak:-0} \${cur:-0} \${oom:-0}"
}
# Every second: the usage, and whether the server still beats; a job whose server is gone ends itself (USR1).
( while :; do
  usage > "$dir/usage.tmp" && mv "$dir/usage.tmp" "$dir/usage"
  beat=$(cat "$alive" 2>/dev/null)
  if [ -n "$beat" ] && [ $(($(date +%s%N) / 1000000 - beat)) -gt ${heartbeat.staleMs} ]; then
    echo "a2rl: the server that started this job stopped beating; the job ends" >&2; kill -USR1 $$; break
  fi
  sleep 1
done ) &
loop=$!
term() {
  trapped=1
  for p in $(cat "$procs"); do
    [ "$p" = $$ ] || [ "$p" = "$loop" ] || [ "$(cat /proc/$p/comm 2>/dev/null)" = bwrap ] || kill -TERM "$p" 2>/dev/null
  done
}
# USR1: KILL to everything of the job but this script, bwrap too, so that the exit is still written.
kill_all() {
  trapped=1
  for p in $(cat "$procs"); do [ "$p" = $$ ] || [ "$p" = "$loop" ] || kill -KILL "$p" 2>/dev/null; done
}
trap term TERM
trap kill_all USR1
gpu_devices=
for g in $(echo "\${SLURM_JOB_GPUS:-}" | tr , ' '); do gpu_devices="$gpu_devices --dev-bind-try /dev/nvidia$g /dev/nvidia$g"; done
[ -n "$gpu_devices" ] && gpu_devices="$gpu_devices --dev-bind-try /dev/nvidiactl /dev/nvidiactl --dev-bind-try /dev/nvidia-uvm /dev/nvidia-uvm"
pids_dir=
if [ -n "$(mnt pids)" ] && mkdir -p "$(mnt pids)/a2rl-slurm/\${SLURMD_NODENAME}_job_$SLURM_JOB_ID" 2>/dev/null; then
  pids_dir=$(mnt pids)/a2rl-slurm/\${SLURMD_NODENAME}_job_$SLURM_JOB_ID; echo ${pids} > "$pids_dir/pids.max"
fi
sh -c '[ -z "$1" ] || echo $$ > "$1/cgroup.procs" || exit 125; shift; exec "$@"' sh "$pids_dir" bwrap ${bwrap.map(shellWord).join(' ')} < /dev/null &
child=$!
# A trapped signal interrupts wait (status 128+n): wait again for the job's own status.
while :; do trapped=; wait $child; status=$?; [ -n "$trapped" ] || break; done
kill $loop 2>/dev/null
set -- $(usage)
# Killed processes leave their cgroup a moment after they die.
for i in 1 2 3 4 5 6 7 8 9 10; do [ -z "$pids_dir" ] || rmdir "$pids_dir" 2>/dev/null || { sleep 0.2; continue; }; break; done
echo "$status $1 $2 $4" > "$dir/exit.tmp" && mv "$dir/exit.tmp" "$dir/exit"
`;
}

class SlurmProcess implements SandboxProcess {
  readonly exited: Promise<ExitStatus>;
  private jobId: string | undefined;
  private state = 'SUBMITTING';
  private reason = '';
  private startedRunning: number | undefined;
  private finalUsage: ResourceUsage | undefined;
  private captureText = '';
  private stopping: Promise<ExitStatus> | undefined;
  /** Set once the job was sent KILL: Slurm then keeps it COMPLETING for seconds, though nothing of it runs. */
  private killed = false;
  private readonly log: LogStream;
  private readonly submitted: Promise<void>;
  private settle: (status: ExitStatus) => void = () => undefined;

  constructor(
    private readonly dir: string,
    sbatch: string[],
    private readonly output: ExecOptions['output'],
    private readonly slurm: SlurmCommands,
    private readonly queue: SlurmQueue,
  ) {
    this.log = new LogStream(join(dir, 'log'), 'captureBytes' in output ? undefined : output);
    this.exited = new Promise((resolve) => (this.settle = resolve));
    this.submitted = new Promise((resolve) => {
      void this.slurm.run('sbatch', sbatch).then(({ error, stdout, stderr }) => {
        const id = stdout.trim().split(';')[0];
        if (error || !id) {
          this.log.note(`a2rl: Slurm refused the job: ${(stderr || String(error)).trim()}\n`);
          this.finish({ exitCode: null, signal: null, oomKilled: false });
        } else {
          this.jobId = id;
          this.state = 'PENDING';
          this.queue.watch(id, (entry) => this.onPoll(entry));
        }
        resolve();
      });
    });
  }

  get pid(): number {
    return -1;
  }

  /** The Slurm job id, once submitted. */
  get slurmJobId(): string | undefined {
    return this.jobId;
  }

  waiting(): string | undefined {
    if (this.finalUsage || this.startedRunning !== undefined) return undefined;
    return this.state === 'SUBMITTING' ? 'being submitted to Slurm' : `pending in Slurm (${this.reason || 'None'})`;
  }

  runningSince(): number | undefined {
    return this.startedRunning;
  }

  captured(): string {
    return this.captureText;
  }

  usage(): ResourceUsage {
    if (this.finalUsage) return this.finalUsage;
    const fields = readNumbers(join(this.dir, 'usage'));
    return { cpuSeconds: (fields[0] ?? 0) / 1e9, peakMemoryBytes: fields[1] ?? 0, memoryBytes: fields[2] ?? 0, measured: true };
  }

  stop(graceMs: number): Promise<ExitStatus> {
    this.stopping ??= this.terminate(graceMs);
    return this.stopping;
  }

  private async terminate(graceMs: number): Promise<ExitStatus> {
    await this.submitted;
    if (this.finalUsage || !this.jobId) return this.exited;
    // The poll may not have seen it start yet: ask the controller now.
    if (this.startedRunning === undefined) this.onPoll(await this.queueEntry(this.jobId));
    if (this.finalUsage) return this.exited;
    if (this.startedRunning === undefined) {
      // Still pending: it never ran, so it simply leaves the queue.
      await this.scancel([this.jobId]);
      return this.exited;
    }
    // The job script forwards TERM to the job's processes, and turns USR1 into KILL to all of them (see jobScript).
    await this.scancel(['--batch', '--signal=TERM', this.jobId]);
    if ((await this.exitWithin(graceMs)) === 'exited') return this.exited;
    await this.scancel(['--batch', '--signal=USR1', this.jobId]);
    if ((await this.exitWithin(3000)) === 'exited') return this.exited;
    // The script itself does not answer (its node is lost or overloaded): Slurm kills what is left.
    await this.scancel(['--full', '--signal=KILL', this.jobId]);
    this.killed = true;
    await this.scancel([this.jobId]);
    return this.exited;
  }

  private async queueEntry(jobId: string): Promise<QueueEntry | undefined> {
    const { error, stdout } = await this.slurm.run('squeue', ['-h', '-t', 'all', '-j', jobId, '-o', '%T|%r']);
    const [state, reason] = stdout.trim().split('|');
    return error || !state ? undefined : { state, reason: reason ?? '' };
  }

  private async scancel(args: string[]): Promise<void> {
    await this.slurm.run('scancel', args);
  }

  private exitWithin(ms: number): Promise<'exited' | 'timeout'> {
    const timer = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), ms).unref());
    return Promise.race([this.exited.then(() => 'exited' as const), timer]);
  }

  private onPoll(entry: QueueEntry | undefined): void {
    if (this.finalUsage) return;
    if (entry) {
      this.state = entry.state;
      this.reason = entry.reason;
    }
    if (this.startedRunning === undefined) {
      const [startedAt] = readNumbers(join(this.dir, 'started'));
      if (startedAt) this.startedRunning = startedAt;
      else if (entry && entry.state !== 'PENDING' && entry.state !== 'GONE') this.startedRunning = Date.now();
    }
    this.log.pump();
    const exit = readNumbers(join(this.dir, 'exit'));
    if (exit.length === 4) {
      const [status, cpu, peak, oom] = exit as [number, number, number, number];
      this.finalUsage = { cpuSeconds: cpu / 1e9, peakMemoryBytes: peak, measured: true };
      this.finish({ exitCode: status, signal: null, oomKilled: oom > 0 || entry?.state === 'OUT_OF_MEMORY' });
    } else if (entry && (endedStates.has(entry.state) || entry.state === 'GONE' || (this.killed && entry.state === 'COMPLETING'))) {
      // Ended without its script's last word: cancelled, killed, out of time, or its node failed.
      const usage = this.usage();
      this.finalUsage = { ...usage, memoryBytes: undefined };
      const killed = this.killed || entry.state === 'CANCELLED' || entry.state === 'TIMEOUT';
      this.finish({
        exitCode: null,
        signal: killed && this.startedRunning !== undefined ? 'SIGKILL' : null,
        oomKilled: entry.state === 'OUT_OF_MEMORY',
      });
    }
  }

  private finish(status: ExitStatus): void {
    this.finalUsage ??= { cpuSeconds: 0, peakMemoryBytes: 0, measured: true };
    if (this.jobId) this.queue.unwatch(this.jobId);
    this.log.pump();
    if ('captureBytes' in this.output) this.captureText = readStart(join(this.dir, 'log'), this.output.captureBytes);
    rmSync(this.dir, { recursive: true, force: true });
    this.settle(status);
  }
}

function readNumbers(path: string): number[] {
  try {
    return readFileSync(path, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

function readStart(path: string, bytes: number): string {
  try {
    const fd = openSync(path, 'r');
    try {
      const buffer = Buffer.alloc(bytes);
      return buffer.subarray(0, readSync(fd, buffer, 0, bytes, 0)).toString('utf8');
    } finally {
      closeSync(fd);
    }
  } catch {
    return '';
  }
}

/** Copies what the job writes to its log on the shared root into the job's own log, as it comes. */
class LogStream {
  private offset = 0;

  constructor(
    private readonly source: string,
    private readonly target: OutputSink | undefined,
  ) {}

  pump(): void {
    if (this.target === undefined) return;
    let fd: number;
    try {
      fd = openSync(this.source, 'r');
    } catch {
      return;
    }
    try {
      const buffer = Buffer.alloc(1 << 16);
      for (
        let read = readSync(fd, buffer, 0, buffer.length, this.offset);
        read > 0;
        read = readSync(fd, buffer, 0, buffer.length, this.offset)
      ) {
        // The sink may keep the chunk: it gets a copy, the buffer is reused.
        this.target.write(Buffer.from(buffer.subarray(0, read)));
        this.offset += read;
      }
    } finally {
      closeSync(fd);
    }
  }

  note(text: string): void {
    this.target?.write(Buffer.from(text));
  }
}
