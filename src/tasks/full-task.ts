import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Mount } from '../../sandbox/contract.js';
import { A2rlError } from '../util/errors.js';
import { packageRoot, tasksRoot } from '../util/paths.js';
import { preparedAssetPaths, verifyAssets } from './assets.js';
import { type FullTaskFile, readTaskFile } from './task.js';

/** Where the full tier's Python environment appears in every sandbox of a full-tier task: the agent's and the grader's. */
export const fullTierRuntimeTarget = '/opt/a2rl/venv';

/**
 * A full-tier task resolved for one home and base model: its declaration, the prepared assets checked against their
 * manifests, and the host paths a run and its grading mount.
 */
export interface FullTask extends FullTaskFile {
  dir: string;
  /** The run's base model, a Hugging Face id: the one given, else the task's defaultModel. */
  modelId: string;
  paths: {
    /** data/ of the prepared assets: the visible split only. */
    trainData: string;
    /** eval/ of the prepared assets (public.jsonl, private.jsonl): mounted into grading sandboxes only. */
    evalData: string;
    /** The prepared base model folder. */
    baseModel: string;
    /** tasks/hflm: the package the grader uses and the agent may import. */
    library: string;
    grader: string;
    instructions: string;
    /** The Python environment (.venv-full), mounted read-only at {@link fullTierRuntimeTarget}. */
    runtime: string;
  };
}

/**
 * Resolves a full-tier task for a run in `home` on base model `modelId` (default: the task's). Refuses, changing
 * nothing, when the runtime is not built (naming scripts/setup.sh) or the assets are missing or changed (naming the
 * `a2rl prepare` command), so a run never starts on data it cannot show or grade.
 */
export function resolveFullTask(taskId: string, home: string, modelId?: string): FullTask {
  const dir = join(tasksRoot, taskId);
  if (!existsSync(join(dir, 'task.json'))) throw new A2rlError('NOT_FOUND', `No task "${taskId}" in ${tasksRoot}; a2rl tasks lists them.`);
  const file = readTaskFile(dir);
  if (file.tier !== 'full') {
    throw new A2rlError(
      'INVALID_INPUT',
      `${taskId} is a ${file.tier}-tier task: its data and model ship in ${dir}; no base model is chosen.`,
    );
  }
  const model = modelId ?? file.defaultModel;
  const runtime = join(packageRoot, file.runtime);
  if (!existsSync(join(runtime, 'bin', 'python'))) {
    throw new A2rlError(
      'UNAVAILABLE',
      `${runtime} is missing: run scripts/setup.sh (it builds ${file.runtime}), then start the run again.`,
    );
  }
  verifyAssets(taskId, home, model);
  const assets = preparedAssetPaths(taskId, home, model);
  return {
    ...file,
    dir,
    modelId: model,
    paths: {
      trainData: assets.data,
      evalData: assets.eval,
      baseModel: assets.model,
      library: join(tasksRoot, file.library),
      grader: join(dir, 'grader'),
      instructions: join(dir, file.instructions),
      runtime,
    },
  };
}

/**
 * What a sandbox of a full-tier task adds to its spec: the runtime read-only, first on PATH, so `python3` in a job and
 * the grader's `python3` are the pinned environment's.
 */
export function fullTierRuntime(task: FullTask): { mounts: Mount[]; env: Record<string, string> } {
  return {
    mounts: [{ source: task.paths.runtime, target: fullTierRuntimeTarget, readOnly: true }],
    env: { PATH: `${fullTierRuntimeTarget}/bin:/usr/local/bin:/usr/bin:/bin` },
  };
}
