import { closeSync, fstatSync, mkdirSync, writeSync } from 'node:fs';
import { join, posix } from 'node:path';
import type { Mount } from '../../sandbox/contract.js';
import { packageRoot } from '../util/paths.js';
import { readAt, SafeDir } from '../util/safe-fs.js';

/**
 * What a job's Python actually ran, written by a start-up hook in the job (trace-hook/sitecustomize.py): which
 * trainer classes trained, whether a gradient step ran, whether it sampled between gradient steps, which workspace
 * files it read. The report's training route is decided from it (src/reports/route.ts).
 *
 * The trace lies in a folder the run's jobs can write (they write it: workspace/.a2rl/traces, kept in the run's folder
 * when the job ends), so it is evidence, not proof: it is read to a
 * bound, line by line, and whatever is not a well-formed fact is skipped. An agent that forges or deletes it (or
 * starts Python with -I, -S or its own PYTHONPATH, which leaves the hook out) can only mislabel its own run's route;
 * the scores, the budget and every other run are untouched.
 */

/** Where the hook lies in the sandbox (read-only). */
const hookTarget = '/a2rl/trace-hook';
const hookSource = join(packageRoot, 'src', 'jobs', 'trace-hook');
/**
 * Where the jobs write their traces: in the workspace (its filesystem and quota), since no folder outside it may be
 * writable from a run's sandbox; the job manager keeps each training job's trace in the run's folder when it ends.
 */
const workspaceTraces = ['.a2rl', 'traces'];

/** The job's id, for the hook to name its trace file. */
export const traceJobVariable = 'JOB_TRACE_ID';

/** Most bytes of one job's trace read back: the hook writes each fact once per process. */
const maxTraceBytes = 256 * 1024;
/**
 * Of those, read from the end of a longer trace: its processes' last facts (a gradient step, the backward passes at
 * exit) come after whatever their data loaders' reads and the other processes wrote.
 */
const traceTailBytes = 64 * 1024;
/** Most Python command lines a trace is read for. */
const maxPrograms = 16;
/** Most distinct files a trace's reads are kept for. */
const maxReads = 1024;

export interface JobTrace {
  /** A Python process of the job started with the hook. */
  python: boolean;
  /** The command lines of the job's Python processes, as they started (at most 16). */
  programs: string[][];
  /** Trainer classes of the installed trl or transformers, by what was done with them. */
  trainers: { built: string[]; trained: string[] };
  /** Backward passes counted at exit (at least 1 once one ran, even if the job was killed). */
  gradients: number;
  /** A sampled generation came between two backward passes: the job trained on samples it drew itself. */
  online: boolean;
  /** Workspace-relative files the job read (the task's library and Python sources excepted). */
  reads: string[];
}

/** The kept traces of the run's ended jobs, on the host: inside the run's folder, so the disk account counts them. */
function tracesFolder(runDir: string): string {
  return join(runDir, 'traces');
}

/** What the run's sandbox needs for its jobs to be traced: the hook on PYTHONPATH, the trace folder named (the hook makes it). */
export function jobTraceSandbox(sandboxWorkspace: string): { mounts: Mount[]; pythonPath: string; env: Record<string, string> } {
  return {
    mounts: [{ source: hookSource, target: hookTarget, readOnly: true }],
    pythonPath: hookTarget,
    env: { JOB_TRACE_DIR: posix.join(sandboxWorkspace, ...workspaceTraces) },
  };
}

/**
 * Keeps an ended job's trace (its first 192 KiB and last 64 KiB) in the run's folder, where the reports read it after the workspace is
 * unmounted or freed: read from the workspace without following links (the agent's jobs can put anything there).
 * False where the job wrote none.
 */
export function keepJobTrace(runDir: string, workspaceRoot: string, jobId: number): boolean {
  let text: Buffer;
  try {
    text = SafeDir.withTrusted(workspaceRoot, (root) => {
      const dir = root.openDir(workspaceTraces);
      try {
        const fd = dir.openFile(traceFile(jobId));
        try {
          return readTraceBounded(fd);
        } finally {
          closeSync(fd);
        }
      } finally {
        dir.close();
      }
    });
  } catch {
    return false;
  }
  mkdirSync(tracesFolder(runDir), { recursive: true, mode: 0o700 });
  // A run served before traces were kept here had this folder writable from its sandbox: a link in it is refused.
  SafeDir.withTrusted(tracesFolder(runDir), (dir) => {
    const fd = dir.openFileForWrite(traceFile(jobId), false);
    try {
      writeSync(fd, text);
    } finally {
      closeSync(fd);
    }
  });
  return true;
}

/** A trace's first bytes and its last `traceTailBytes`, `maxTraceBytes` in all; the line cut at each end is skipped when read. */
function readTraceBounded(fd: number): Buffer {
  const size = fstatSync(fd).size;
  if (size <= maxTraceBytes) return readAt(fd, 0, maxTraceBytes);
  return Buffer.concat([
    readAt(fd, 0, maxTraceBytes - traceTailBytes),
    Buffer.from('\n'),
    readAt(fd, size - traceTailBytes, traceTailBytes),
  ]);
}

function traceFile(jobId: number): string {
  return `job-${jobId}.jsonl`;
}

const names = (value: unknown) => (typeof value === 'string' && /^\w{1,100}$/.test(value) ? value : undefined);

/** A job's trace, or undefined where it wrote none (no Python, or Python without the hook). */
export function readJobTrace(runDir: string, jobId: number): JobTrace | undefined {
  let text: string;
  try {
    text = SafeDir.withTrusted(tracesFolder(runDir), (dir) => {
      const fd = dir.openFile(traceFile(jobId));
      try {
        return readTraceBounded(fd).toString('utf8');
      } finally {
        closeSync(fd);
      }
    });
  } catch {
    return undefined;
  }
  const trace: JobTrace = { python: false, programs: [], trainers: { built: [], trained: [] }, gradients: 0, online: false, reads: [] };
  const add = (list: string[], value: string | undefined) => value !== undefined && !list.includes(value) && list.push(value);
  for (const line of text.split('\n')) {
    let fact: Record<string, unknown>;
    try {
      const parsed = JSON.parse(line) as unknown;
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) continue;
      fact = parsed as Record<string, unknown>;
    } catch {
      continue;
    }
    if (fact.fact === 'python') {
      trace.python = true;
      const argv = Array.isArray(fact.argv) ? fact.argv.filter((a): a is string => typeof a === 'string') : [];
      if (argv.length > 0 && trace.programs.length < maxPrograms) trace.programs.push(argv);
    } else if (fact.fact === 'gradient') trace.gradients = Math.max(trace.gradients, 1);
    else if (fact.fact === 'online') trace.online = true;
    else if (fact.fact === 'exit' && typeof fact.gradients === 'number' && Number.isSafeInteger(fact.gradients)) {
      trace.gradients = Math.max(trace.gradients, fact.gradients);
    } else if (fact.fact === 'trainer' && (fact.phase === 'init' || fact.phase === 'train')) {
      add(fact.phase === 'init' ? trace.trainers.built : trace.trainers.trained, names(fact.name));
    } else if (fact.fact === 'read' && typeof fact.path === 'string' && fact.path.length <= 4096 && trace.reads.length < maxReads) {
      add(trace.reads, fact.path);
    }
  }
  return trace;
}
