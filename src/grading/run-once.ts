import type { ExitStatus, Mount, ResourceLimits, SandboxBackend } from '../../sandbox/contract.js';

export interface OneShotRequest {
  name: string;
  mounts: Mount[];
  env: Record<string, string>;
  workdir: string;
  argv: string[];
  limits: ResourceLimits;
  timeoutMs: number;
  /** Bytes of stdout to keep. */
  captureBytes: number;
}

export interface OneShotResult extends ExitStatus {
  timedOut: boolean;
  output: string;
}

/**
 * Runs one short command in a sandbox of its own and throws it away: for the server's own
 * helpers (running model-written code, a rubric judge), which are parts of a grading and
 * not jobs of their own.
 */
export async function runOnce(backend: SandboxBackend, request: OneShotRequest): Promise<OneShotResult> {
  const sandbox = await backend.create({
    name: request.name,
    mounts: request.mounts,
    hidden: [],
    env: request.env,
    workdir: request.workdir,
    limits: { cpus: request.limits.cpus, memoryBytes: request.limits.memoryBytes, pids: request.limits.pids },
    grading: true,
  });
  try {
    const process = sandbox.exec({
      command: request.argv,
      limits: request.limits,
      output: { captureBytes: request.captureBytes },
      tag: `${request.name}-${Math.random().toString(36).slice(2, 10)}`,
      timeoutMs: request.timeoutMs,
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      void process.stop(500);
    }, request.timeoutMs);
    const status = await process.exited;
    clearTimeout(timer);
    return { ...status, timedOut, output: process.captured() };
  } finally {
    await sandbox.destroy();
  }
}
