import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { A2rlError } from '../util/errors.js';
import { hashDirectory, sha256, treeHash } from '../util/hashing.js';
import { packageRoot, tasksRoot } from '../util/paths.js';
import { preparedAssetPaths, readManifestFiles, verifyAssets } from './assets.js';
import { parseBudget } from './budget.js';
import { emptyLimits, type FullTask, readTaskFile, type TaskLibrary } from './task.js';

/** Where the full tier's Python environment appears in every sandbox of a full-tier task: the agent's and the grader's. */
export const fullTierRuntimeTarget = '/opt/a2rl/venv';
/** Where a grading sandbox shows the run's base model (a LoRA adapter is merged onto it). */
const gradingBaseTarget = '/opt/a2rl/base';
/** A full model may be at most this many times its base (hflm.submission's FULL_SIZE_FACTOR, which the grader checks exactly). */
const fullSizeFactor = 1.5;

/**
 * The variables that size a full-tier process's thread pools to `cpus`, the CPUs its job holds. A sandbox shows no
 * /sys, so the cgroup's CPU quota is invisible and each pool would size itself to every host CPU: on a 64-thread
 * GPU server the tokenizers' rayon pool alone would exceed a grading's process limit before vLLM starts its own.
 * OpenMP's and BLAS's are set by every sandbox backend already (per job).
 */
export function threadPoolEnv(cpus: number): Record<string, string> {
  const threads = Math.max(1, Math.ceil(cpus));
  return {
    RAYON_NUM_THREADS: String(threads),
    // Set either way: unset, the tokenizers library warns and may deadlock when vLLM forks after it ran in parallel.
    TOKENIZERS_PARALLELISM: threads > 1 ? 'true' : 'false',
    TORCHINDUCTOR_COMPILE_THREADS: String(threads),
  };
}

/**
 * Resolves a full-tier task for a run in `home` on base model `modelId` (default: the task's). Refuses, changing
 * nothing, when the runtime is not built (naming scripts/setup.sh) or the assets are missing or changed (naming the
 * `a2rl prepare` command), so a run never starts on data it cannot show or grade.
 */
export async function resolveFullTask(taskId: string, home: string, modelId?: string): Promise<FullTask> {
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
  await verifyAssets(taskId, home, model);
  const assets = preparedAssetPaths(taskId, home, model);
  const library = join(tasksRoot, file.library);
  const grader = join(dir, 'grader');
  // Verified against their manifests just now, so the manifests stand for the files' content: no second read of the weights.
  const modelFiles = readManifestFiles(assets.model);
  const baseModelHash = manifestTreeHash(assets.model, modelFiles);
  const assetsFolder = join(assets.data, '..');
  const assetsManifest = manifestSha256(assetsFolder);
  const evalHash = manifestTreeHash(assetsFolder, readManifestFiles(assetsFolder), assetsManifest);
  const standins = standinLibraries(file.standins ?? [], runtime, library);
  const baseBytes = modelFiles.reduce((sum, f) => sum + f.bytes, 0);
  return {
    ...file,
    dir,
    modelId: model,
    paths: {
      trainData: assets.data,
      evalData: assets.eval,
      baseModel: assets.model,
      grader,
      instructions: join(dir, file.instructions),
    },
    libraries: [{ name: file.library, source: library }, ...standins.libraries],
    pythonRuntime: {
      python: `${fullTierRuntimeTarget}/bin/python`,
      mounts: [{ source: runtime, target: fullTierRuntimeTarget, readOnly: true }],
      // First on PATH, so `python3` in a job or an exec is the pinned environment's; pools sized to a job's largest share.
      env: { PATH: `${fullTierRuntimeTarget}/bin:/usr/local/bin:/usr/bin:/bin`, ...threadPoolEnv(file.jobs.cpus) },
    },
    // hflm's sampler serves every full task: the task's prompt and reward, and the base model an adapter is merged onto.
    rolloutSampler: ['-m', 'hflm.rollouts', '--task', taskId, '--base', 'models/base'], // jobs start in the workspace
    gradingInputs: {
      mounts: [{ source: assets.model, target: gradingBaseTarget, readOnly: true }],
      args: ['--base', gradingBaseTarget, '--base-id', model],
    },
    checkpoint: {
      maxFiles: file.submission.maxFiles,
      maxBytes: Math.ceil(fullSizeFactor * baseBytes),
      required: [['config.json', 'adapter_config.json']],
      holds:
        'a Hugging Face model: config.json, *.safetensors and tokenizer files (model.save_pretrained and tokenizer.save_pretrained), or a PEFT LoRA adapter of the base: adapter_config.json and adapter_model.safetensors',
      // hflm.model_dir's PICKLE_SUFFIXES: refused here too, so that such a folder costs no submission.
      refused: {
        suffixes: ['.bin', '.pt', '.pth', '.pkl', '.ckpt'],
        why: 'pickled weights are never loaded (unpickling runs code). Delete them and save with model.save_pretrained(dir, safe_serialization=True), then submit again.',
      },
    },
    defaultLimits: parseBudget(file.defaultBudget, emptyLimits),
    // The base model is part of what decides a score: a LoRA adapter graded on one base says nothing about another.
    graderVersion: `${file.grader.version}+${sha256([hashDirectory(grader), hashDirectory(library), evalHash, baseModelHash].join('\n')).slice(0, 12)}`,
    baseModelHash,
    environment: { packages: standins.packages, assetsManifest },
  };
}

/** Which environment packages a full-tier task with stand-ins plays on (task.json `standins`): `A2RL_ENV_PACKAGES`. */
const environmentSelections = ['standin', 'upstream'] as const;
export type EnvironmentSelection = (typeof environmentSelections)[number];

/**
 * `A2RL_ENV_PACKAGES`: `standin` (the default) or `upstream`. The stand-in by default, whatever the runtime holds: a
 * score then never depends on what happens to be installed on a host, and the stand-in is what CI checks against
 * upstream's behaviour; `upstream` is asked for, and refused where the runtime lacks the package.
 */
export function environmentSelection(value = process.env.A2RL_ENV_PACKAGES): EnvironmentSelection {
  if (value === undefined || value === '') return 'standin';
  if (!(environmentSelections as readonly string[]).includes(value)) {
    throw new A2rlError(
      'INVALID_INPUT',
      `A2RL_ENV_PACKAGES=${value} is not an environment selection: set it to standin or upstream, or unset it (standin).`,
    );
  }
  return value as EnvironmentSelection;
}

/**
 * The task's stand-ins as libraries shown at lib/<name> (tasks/<library>/standins/<name>), ahead of the runtime's
 * site-packages on PYTHONPATH, so a stand-in is never shadowed by, nor shadows unasked, an installed upstream package.
 * With `upstream` none is shown and each must be in the runtime (`upstreamPackage`), else the run is refused. With
 * them, the package each one plays as (FullTask `environment`): found here once, as the libraries are chosen.
 */
export function standinLibraries(
  names: string[],
  runtime: string,
  library: string,
  selection: EnvironmentSelection = environmentSelection(),
): { libraries: TaskLibrary[]; packages: FullTask['environment']['packages'] } {
  if (selection === 'standin') {
    return {
      libraries: names.map((name) => ({ name, source: join(library, 'standins', name) })),
      packages: names.map((name) => ({ name, playedAs: 'stand-in' })),
    };
  }
  const found = names.map((name) => ({ name, upstream: upstreamPackage(runtime, name) }));
  const missing = found.filter((f) => f.upstream === undefined).map((f) => f.name);
  if (missing.length > 0) {
    throw new A2rlError(
      'UNAVAILABLE',
      `A2RL_ENV_PACKAGES=upstream, but ${runtime} has no ${missing.join(', ')} package: install upstream's into its site-packages, or unset A2RL_ENV_PACKAGES to play on the stand-in.`,
    );
  }
  return { libraries: [], packages: found.map((f) => ({ name: f.name, playedAs: `upstream:${f.upstream}` })) };
}

/**
 * The upstream package `name` as the runtime holds it: `dist@version` of the distribution that provides it (its
 * dist-info's top_level.txt or RECORD), `unknown` for a bare site-packages/<name> folder; undefined where it has none.
 */
export function upstreamPackage(runtime: string, name: string): string | undefined {
  const libDir = join(runtime, 'lib');
  if (!existsSync(libDir)) return undefined;
  let bare: string | undefined;
  for (const python of readdirSync(libDir)) {
    const site = join(libDir, python, 'site-packages');
    if (!existsSync(site)) continue;
    if (existsSync(join(site, name))) bare = 'unknown';
    for (const entry of readdirSync(site).filter((e) => e.endsWith('.dist-info'))) {
      const info = join(site, entry);
      const provides = ['top_level.txt', 'RECORD']
        .filter((file) => existsSync(join(info, file)))
        .flatMap((file) => readFileSync(join(info, file), 'utf8').split('\n'))
        .map((line) => line.split(/[/,]/)[0]!.trim());
      if (!provides.includes(name)) continue;
      const metadata = existsSync(join(info, 'METADATA')) ? readFileSync(join(info, 'METADATA'), 'utf8') : '';
      const field = (key: string) => new RegExp(`^${key}: *(.+)$`, 'm').exec(metadata)?.[1]?.trim();
      return `${field('Name') ?? entry.replace(/-[^-]*\.dist-info$/, '')}@${field('Version') ?? 'unknown'}`;
    }
  }
  return bare;
}

/** The folder's tree hash (as hashDirectory and a submission's snapshot compute it) from its verified manifest, manifest.json included. */
function manifestTreeHash(folder: string, files: Array<{ path: string; sha256: string }>, manifest = manifestSha256(folder)): string {
  return treeHash([...files, { path: 'manifest.json', sha256: manifest }]);
}

function manifestSha256(folder: string): string {
  return sha256(readFileSync(join(folder, 'manifest.json')));
}
