import { createHash } from 'node:crypto';
import { createReadStream, existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { A2rlError } from '../util/errors.js';
import { defaultHome } from '../util/paths.js';

/**
 * The full tier's assets, as `a2rl prepare` (tasks/hflm/assets.py) writes them under the home:
 * `assets/<task>/` (data/train.jsonl visible; eval/public.jsonl and eval/private.jsonl hidden) and
 * `models/<org>--<name>/` (the base model), each with a manifest.json of sha256 and bytes per file.
 * The builder version must match hflm.assets.BUILDER_VERSION: assets another builder wrote are refused until prepared again.
 */
const assetsBuilderVersion = 2;

const modelIdPattern = /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/;

interface Manifest {
  builder_version: number;
  files: Record<string, { sha256: string; bytes: number }>;
}

/** A run cannot start: its assets are missing or changed. The message names the command that rebuilds them. */
export class AssetsNotPreparedError extends A2rlError {
  constructor(
    readonly taskId: string,
    readonly problems: string[],
    readonly prepareCommand: string,
  ) {
    super(
      'UNAVAILABLE',
      `The assets of ${taskId} are not as prepared: ${problems.join('; ')}. Run: ${prepareCommand} (add --from DIR on a host without hub access).`,
    );
  }
}

function assetsDir(home: string, taskId: string): string {
  return join(home, 'assets', taskId);
}

/** Where `a2rl prepare` puts a task's splits (data/ visible, eval/ hidden) and a base model under the home. */
export function preparedAssetPaths(taskId: string, home: string, modelId: string): { data: string; eval: string; model: string } {
  const dir = assetsDir(home, taskId);
  return { data: join(dir, 'data'), eval: join(dir, 'eval'), model: modelAssetsDir(home, modelId) };
}

function modelAssetsDir(home: string, modelId: string): string {
  if (!modelIdPattern.test(modelId) || modelId.includes('..')) {
    throw new A2rlError(
      'INVALID_INPUT',
      `"${modelId}" is not a Hugging Face model id: give it as <org>/<name>, e.g. Qwen/Qwen2.5-1.5B-Instruct.`,
    );
  }
  return join(home, 'models', modelId.replace('/', '--'));
}

/** The exact command that (re)builds a task's assets in this home. */
function prepareCommandFor(taskId: string, home: string, modelId?: string): string {
  const homeFlag = home === defaultHome() ? '' : ` --home ${home}`;
  return `a2rl${homeFlag} prepare ${taskId}${modelId ? ` --model ${modelId}` : ''}`;
}

/**
 * Checks a task's splits (and, given one, its base model) against their manifests: every listed file present with
 * its size and sha256. Rejects with AssetsNotPreparedError naming each problem and the `a2rl prepare` command to run.
 * The files are hashed as they are read, a block at a time: a 1.5B model's 3 GB take seconds, during which a server
 * that starts a run keeps answering its other runs.
 */
export async function verifyAssets(taskId: string, home: string, modelId?: string): Promise<void> {
  const problems = await folderProblems(assetsDir(home, taskId));
  if (modelId !== undefined) problems.push(...(await folderProblems(modelAssetsDir(home, modelId))));
  if (problems.length > 0) throw new AssetsNotPreparedError(taskId, problems, prepareCommandFor(taskId, home, modelId));
}

async function folderProblems(folder: string): Promise<string[]> {
  const manifestPath = join(folder, 'manifest.json');
  if (!existsSync(manifestPath)) return [`${manifestPath} is missing`];
  let manifest: Partial<Manifest> | null;
  try {
    manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as Partial<Manifest> | null;
  } catch {
    return [`${manifestPath} is not valid JSON`];
  }
  if (typeof manifest?.files !== 'object' || manifest.files === null) return [`${manifestPath} is not a manifest that a2rl prepare wrote`];
  if (manifest.builder_version !== assetsBuilderVersion) {
    return [`${manifestPath} was written by builder version ${manifest.builder_version}, this is ${assetsBuilderVersion}`];
  }
  const problems: string[] = [];
  for (const [name, want] of Object.entries(manifest.files)) {
    const path = join(folder, name);
    if (!existsSync(path) || !statSync(path).isFile()) problems.push(`${path} is missing`);
    else if (statSync(path).size !== want.bytes || (await fileSha256(path)) !== want.sha256)
      problems.push(`${path} has changed (its sha256 is not the manifest's)`);
  }
  return problems;
}

/** The files a verified folder's manifest lists, with their sha256 and size. */
export function readManifestFiles(folder: string): Array<{ path: string; sha256: string; bytes: number }> {
  const manifest = JSON.parse(readFileSync(join(folder, 'manifest.json'), 'utf8')) as Manifest;
  return Object.entries(manifest.files).map(([path, entry]) => ({ path, sha256: entry.sha256, bytes: entry.bytes }));
}

/** Streamed, a MiB at a time: model weights are larger than one Buffer may be, and each block leaves the event loop free. */
async function fileSha256(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const block of createReadStream(path, { highWaterMark: 1 << 20 })) hash.update(block as Buffer);
  return hash.digest('hex');
}
