import type { ExitStatus, ResourceUsage, SandboxProcess } from '../../sandbox/contract.js';
import { A2rlError } from '../util/errors.js';

/** Who asks for GPUs: the agents' jobs share the pool; grading has a slot of its own. */
export type GpuClass = 'jobs' | 'grading';

interface Waiter {
  count: number;
  grant: (gpus: number[]) => void;
}

/**
 * Hands the host's GPUs (`serve --gpus 0,1`) to jobs whole, first come first served, and
 * queues requests while too few are free. With two GPUs or more, the last one is grading's
 * own: training never holds it, and grading never takes the others, so neither starves the
 * other. With a single GPU both share it, and a waiting grading is served first.
 */
export class GpuAllocator {
  private readonly pools: Record<GpuClass, number[]>;
  private readonly free: Record<GpuClass, number[]>;
  private readonly queues: Record<GpuClass, Waiter[]> = { jobs: [], grading: [] };

  constructor(gpus: number[]) {
    if (new Set(gpus).size !== gpus.length) throw new A2rlError('INVALID_INPUT', `GPU list ${gpus.join(',')} names a GPU twice.`);
    const shared = gpus.length < 2;
    const grading = shared ? gpus : gpus.slice(-1);
    const jobs = shared ? gpus : gpus.slice(0, -1);
    this.pools = { jobs, grading };
    // One list object when shared, so both classes see the same free GPUs.
    const sharedFree = [...gpus];
    this.free = shared ? { jobs: sharedFree, grading: sharedFree } : { jobs: [...jobs], grading: [...grading] };
  }

  /** GPUs of a class's pool, free or not. */
  poolSize(kind: GpuClass): number {
    return this.pools[kind].length;
  }

  /** Requests of a class waiting for GPUs. */
  waiting(kind: GpuClass): number {
    return this.queues[kind].length;
  }

  /** Resolves with `count` GPU indices once they are free; requests are served in order. Aborting withdraws the request. */
  acquire(kind: GpuClass, count: number, signal?: AbortSignal): Promise<number[]> {
    if (!Number.isInteger(count) || count < 1)
      throw new A2rlError('INVALID_INPUT', `Ask for a whole number of GPUs, at least 1 (got ${count}).`);
    if (count > this.pools[kind].length) {
      throw new A2rlError(
        'INVALID_INPUT',
        `This server has ${this.pools[kind].length} GPU(s) for ${kind === 'jobs' ? 'training and rollouts' : 'grading'}; ask for at most that many.`,
      );
    }
    return new Promise((grant, reject) => {
      const waiter = { count, grant };
      this.queues[kind].push(waiter);
      signal?.addEventListener('abort', () => {
        const queue = this.queues[kind];
        if (!queue.includes(waiter)) return;
        queue.splice(queue.indexOf(waiter), 1);
        reject(signal.reason);
        // The head may have been what held smaller requests back.
        this.dispatch();
      });
      this.dispatch();
    });
  }

  /** Gives GPUs back (when their job ended); waiting requests get them. */
  release(gpus: number[]): void {
    for (const gpu of gpus) {
      const kind: GpuClass = this.pools.grading.includes(gpu) && !this.pools.jobs.includes(gpu) ? 'grading' : 'jobs';
      if (this.free[kind].includes(gpu)) throw new A2rlError('INTERNAL', `GPU ${gpu} was released twice.`);
      this.free[kind].push(gpu);
      this.free[kind].sort((a, b) => a - b);
    }
    this.dispatch();
  }

  private dispatch(): void {
    // Grading first: on a shared GPU it must not wait behind a queue of training jobs.
    for (const kind of ['grading', 'jobs'] as const) {
      const queue = this.queues[kind];
      // Strict order within a class: a large request at the head is not overtaken by smaller ones.
      while (queue.length > 0 && queue[0]!.count <= this.free[kind].length) {
        const waiter = queue.shift()!;
        waiter.grant(this.free[kind].splice(0, waiter.count));
      }
    }
  }
}

/**
 * A job that waits in the GPU queue, then starts with the GPUs it was given and gives them
 * back when it ends. Stopping it while it waits withdraws it; it then never ran.
 */
export class GpuQueuedProcess implements SandboxProcess {
  readonly exited: Promise<ExitStatus>;
  private process: SandboxProcess | undefined;
  private grantedAt: number | undefined;
  private readonly withdraw = new AbortController();

  constructor(
    allocator: GpuAllocator,
    kind: GpuClass,
    private readonly count: number,
    start: (gpus: number[]) => SandboxProcess,
  ) {
    const granted = allocator.acquire(kind, count, this.withdraw.signal);
    this.exited = granted.then(
      async (gpus) => {
        if (this.withdraw.signal.aborted) {
          // Stopped in the moment between the grant and now.
          allocator.release(gpus);
          return { exitCode: null, signal: null, oomKilled: false };
        }
        this.grantedAt = Date.now();
        try {
          this.process = start(gpus);
          return await this.process.exited;
        } catch {
          return { exitCode: null, signal: null, oomKilled: false };
        } finally {
          allocator.release(gpus);
        }
      },
      () => ({ exitCode: null, signal: null, oomKilled: false }),
    );
  }

  get pid(): number {
    return this.process?.pid ?? -1;
  }

  waiting(): string | undefined {
    return this.grantedAt === undefined && !this.withdraw.signal.aborted ? `waiting for ${this.count} of the server's GPU(s)` : undefined;
  }

  runningSince(): number | undefined {
    return this.grantedAt;
  }

  usage(): ResourceUsage {
    return this.process?.usage() ?? { cpuSeconds: 0, peakMemoryBytes: 0, measured: true };
  }

  captured(): string {
    return this.process?.captured() ?? '';
  }

  async stop(graceMs: number): Promise<ExitStatus> {
    if (this.grantedAt === undefined) this.withdraw.abort(new Error('stopped while waiting for GPUs'));
    else await this.process?.stop(graceMs);
    return this.exited;
  }
}

/** Parses `--gpus 0,1,3`. */
export function parseGpuList(value: string): number[] {
  const gpus = value.split(',').map((part) => Number(part.trim()));
  if (value.trim() === '' || gpus.some((gpu) => !Number.isInteger(gpu) || gpu < 0)) {
    throw new A2rlError('INVALID_INPUT', `"${value}" is not a GPU list; give host GPU indices separated by commas, e.g. --gpus 0,1.`);
  }
  new GpuAllocator(gpus);
  return gpus;
}
