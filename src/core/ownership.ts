import type { SandboxBackend } from '../../sandbox/contract.js';
import { ownerAlive, processStartTime } from '../../sandbox/process-tree.js';
import { eventRecorder } from '../store/events.js';
import type { Store } from '../store/store.js';
import type { Logger } from '../util/logger.js';

/**
 * Runs and jobs are owned by one serving process, named `<pid>-<start time>` so that a
 * reused pid is never mistaken for the owner. An owner that is not alive has crashed or
 * stopped: what it owned is recovered by the next server (see docs/ARCHITECTURE.md).
 */
export function ownerOfThisProcess(): string {
  return ownerOf(process.pid);
}

/** The owner name of a live process, e.g. a server this process started. */
export function ownerOf(pid: number): string {
  return `${pid}-${processStartTime(pid) ?? 0}`;
}

export function ownerPid(owner: string): number {
  return Number(owner.split('-')[0]);
}

/** The owner of a run no process serves yet: never alive, so the first server to need it adopts it. */
export const noOwner = '0-0';

/**
 * Running jobs (of one run, or all) whose server is gone end as lost, each with its
 * finished event; what they left in the sandbox backend is removed.
 */
export async function markJobsOfStoppedServersLost(store: Store, backend: SandboxBackend, logger: Logger, runId?: string): Promise<void> {
  const now = Date.now();
  const reason = 'the server that ran this job stopped before it ended';
  for (const job of store.listRunningJobs()) {
    if (ownerAlive(job.owner) || (runId !== undefined && job.run_id !== runId)) continue;
    store.finishJob(job.id, {
      state: 'lost',
      reason,
      exit_code: null,
      signal: null,
      cpu_s: job.cpu_s,
      gpu_s: job.gpu_s,
      episodes_done: null,
      result: null,
      ended_at: now,
    });
    const run = store.getRun(job.run_id)!;
    eventRecorder(store, run.id, run.created_at)('job', 'finished', {
      job_id: job.id,
      kind: job.kind,
      state: 'lost',
      reason,
      exit_code: null,
      charged: job.charged === 1,
      cpu_s: job.cpu_s,
      gpu_s: job.gpu_s,
      episodes_done: null,
      log_path: job.log_path,
      duration_s: (now - job.created_at) / 1000,
    });
    logger.warn({ job: job.id, run: job.run_id }, 'job of a stopped server marked lost');
  }
  const swept = await backend.sweep(ownerAlive);
  if (swept.length > 0) logger.warn({ sandbox: backend.name, swept }, 'removed what stopped servers left in the sandbox');
}
