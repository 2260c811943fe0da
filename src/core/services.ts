import type { Grader } from '../grading/grader.js';
import type { JobManager } from '../jobs/job-manager.js';
import type { RoomToRecord } from '../store/disk-full.js';
import type { Store } from '../store/store.js';
import type { Logger } from '../util/logger.js';

/** Server-wide limits every run is held to. */
export interface ServerLimits {
  /** Most bytes each run's workspace may take on disk. */
  diskQuotaBytes: number;
  /** Most training and rollout jobs of all runs running at once. */
  maxJobs: number;
  /** Most exec commands of all runs running at once (each run has its own cap too). */
  maxExecs: number;
  /** Tool calls each run may make per second, sustained (bursts of twice that). */
  callsPerSecond: number;
}

/**
 * What a run is given by the server that serves it: the engine builds these once and hands
 * the same object to every run, so nothing below the engine needs the engine itself.
 */
export interface RunServices {
  /** `$A2RL_HOME`: the store, runs, submissions and snapshots live under it. */
  readonly home: string;
  readonly store: Store;
  readonly jobs: JobManager;
  readonly grader: Grader;
  readonly logger: Logger;
  readonly limits: ServerLimits;
  /** Refuses every call while the home's disk is too full for the store to record it. */
  readonly room: RoomToRecord;
}
