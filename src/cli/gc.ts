import { type Command, InvalidArgumentError } from 'commander';
import type Docker from 'dockerode';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { imageNames, imageTag, minbaseTag } from '../../sandbox/images/build.js';
import { freeWorkspaceImage, workspaceFolder, workspaceImage, workspaceMounted } from '../../sandbox/run-storage.js';
import { type RunRow, Store } from '../store/store.js';
import { diskUsage } from '../util/disk-usage.js';
import { A2rlError } from '../util/errors.js';
import { answeringDockerEngine } from './docker-engine.js';
import type { CliContext } from './options.js';

/** Something gc can give back: what it is, the bytes it holds, and how to free it. */
interface Reclaimable {
  kind: 'workspace' | 'image' | 'build-cache';
  name: string;
  bytes: number;
  free: () => Promise<void>;
}

/** What a sweep found: what it may free, what it keeps and why (a run whose check still reads its workspace), or why it could not look. */
interface Sweep {
  found: Reclaimable[];
  kept: Array<{ name: string; why: string }>;
  skipped?: string;
}

/** How long gc waits for the Docker engine before it says so and frees only the home. */
const dockerTimeoutSeconds = 5;
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

/**
 * Whether an ended run's workspace may go: the contamination check reads it after the run ends, so it stays until a
 * verdict is recorded; one its server interrupted is none (the next server checks again, as the engine's
 * checkUncheckedRuns does). Undefined when it may go, else why not.
 */
export function workspaceStillRead(store: Store, run: RunRow): string | undefined {
  if (run.state !== 'ended') return `active: it uses its workspace (end it first: a2rl runs revoke ${run.id})`;
  const latest = store.latestIntegrityCheck(run.id, 'contamination');
  if (!latest) return `its contamination check is not recorded yet, and it reads the workspace: record it with a2rl runs check ${run.id}`;
  if ((JSON.parse(latest.details) as { interrupted?: boolean }).interrupted)
    return `its contamination check is recorded only as interrupted, and it reads the workspace: record it with a2rl runs check ${run.id}`;
  return undefined;
}

/**
 * An ended run's workspace, image or folder, as something to free; the run's record (events, logs, snapshots,
 * submissions, scores) stays: reports and exports read the store and the snapshots, never the workspace.
 */
export async function endedWorkspace(run: RunRow): Promise<Reclaimable | undefined> {
  const image = join(run.dir, workspaceImage);
  const folder = join(run.dir, workspaceFolder);
  const imageBytes = existsSync(image) ? statSync(image).blocks * 512 : 0;
  const folderBytes =
    existsSync(folder) && !workspaceMounted(run.dir) && readdirSync(folder).length > 0 ? (await diskUsage([folder])).bytes : 0;
  if (imageBytes === 0 && folderBytes === 0) return undefined;
  return {
    kind: 'workspace',
    name: run.id,
    bytes: imageBytes + folderBytes,
    free: async () => {
      await freeWorkspaceImage(run.dir);
      // A workspace without an image (no loop mounts here): its files, the folder itself kept empty.
      if (!workspaceMounted(run.dir)) {
        rmSync(folder, { recursive: true, force: true });
        mkdirSync(folder);
      }
    },
  };
}

async function sweepWorkspaces(store: Store, cutoff: number): Promise<Sweep> {
  const sweep: Sweep = { found: [], kept: [] };
  for (const run of store.listRuns()) {
    if (run.state !== 'ended' || (run.ended_at ?? 0) > cutoff) continue;
    const why = workspaceStillRead(store, run);
    const workspace = await endedWorkspace(run);
    if (!workspace) continue;
    if (why) sweep.kept.push({ name: run.id, why });
    else sweep.found.push(workspace);
  }
  return sweep;
}

/**
 * The Docker engine's a2rl images that no current build uses (a2rl/* tags of images since renamed or dropped) and its
 * build cache, both older than the cutoff. The current images stay: every run of the docker backend starts from them.
 */
async function sweepDocker(cutoff: number): Promise<Sweep> {
  let docker: Docker;
  try {
    docker = await answeringDockerEngine(dockerTimeoutSeconds);
  } catch (error) {
    return {
      found: [],
      kept: [],
      skipped: `${(error as Error).message} Images and build cache left as they are (--no-docker: not asked).`,
    };
  }
  const current = new Set<string>([...imageNames.map(imageTag), minbaseTag]);
  const found: Reclaimable[] = [];
  const kept: Sweep['kept'] = [];
  for (const image of await docker.listImages()) {
    const tags = (image.RepoTags ?? []).filter((tag) => tag.startsWith('a2rl/'));
    if (tags.length === 0 || tags.some((tag) => current.has(tag)) || image.Created * 1000 > cutoff) continue;
    found.push({
      kind: 'image',
      name: tags.join(','),
      bytes: image.Size,
      free: async () => void (await docker.getImage(image.Id).remove()),
    });
  }
  const usage = (await docker.df()) as { BuildCache?: Array<{ Size: number; InUse: boolean; LastUsedAt?: string; CreatedAt: string }> };
  const unused = (usage.BuildCache ?? []).filter((entry) => !entry.InUse);
  const recent = unused.filter((entry) => Date.parse(entry.LastUsedAt ?? entry.CreatedAt) > cutoff).length;
  // The engine prunes every unused entry at once: with recent ones among them, the cache stays whole.
  if (unused.length > 0 && recent > 0)
    kept.push({ name: 'build-cache', why: `${recent} of its ${unused.length} unused entries were used more recently than --older-than` });
  else if (unused.length > 0)
    found.push({
      kind: 'build-cache',
      name: `${unused.length} entries`,
      bytes: unused.reduce((sum, entry) => sum + entry.Size, 0),
      free: async () => void (await docker.pruneBuilder()),
    });
  return { found, kept };
}

/**
 * Why an item was not freed, as its kept line says it (`in use: …` or `not freed: …`, then the engine's words), and
 * whether it is only in use (an image a container uses: the engine's 409), which gc goes on past without failing.
 */
export function notFreed(error: unknown): { why: string; inUse: boolean } {
  const { statusCode, json, message } = error as { statusCode?: number; json?: { message?: string }; message?: string };
  const said = (json?.message ?? message ?? String(error)).split('\n')[0];
  const inUse = statusCode === 409;
  return { why: `${inUse ? 'in use' : 'not freed'}: ${said}`, inUse };
}

/** An age: 0, or a number of minutes, hours or days (30m, 12h, 7d). */
export function ageOption(value: string): number {
  const match = /^(\d+(?:\.\d+)?)([mhd])$/.exec(value);
  if (value === '0') return 0;
  if (!match) throw new InvalidArgumentError('Give an age such as 30m, 12h or 7d (0: whatever age).');
  return Number(match[1]) * { m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as 'm' | 'h' | 'd'];
}

/** `a2rl gc`: frees what ended runs and old builds hold on disk; records and scores stay, live runs are never touched. */
export function addGcCommand(program: Command, { home }: CliContext): void {
  program
    .command('gc')
    .description(
      "free disk: ended runs' workspaces (their check recorded), a2rl Docker images no current build uses, and the Docker " +
        "build cache; runs' records, logs, snapshots, submissions and scores stay, and live runs are never touched",
    )
    .option('--older-than <age>', 'only what ended (runs) or was last used (images, build cache) this long ago, e.g. 7d', ageOption, 0)
    .option('--dry-run', 'list what would be freed and how much, and free nothing')
    .option('--no-docker', 'leave the Docker engine alone: free only the home')
    .action(async (options: { olderThan: number; dryRun?: boolean; docker: boolean }) => {
      const cutoff = Date.now() - options.olderThan;
      const path = join(home(), 'store.sqlite');
      if (!existsSync(path)) throw new A2rlError('NOT_FOUND', `No a2rl store at ${path}; pass the --home the runs were made with.`);
      const store = new Store(path);
      let sweeps: Sweep[];
      try {
        sweeps = [await sweepWorkspaces(store, cutoff)];
      } finally {
        store.close();
      }
      if (options.docker) sweeps.push(await sweepDocker(cutoff));
      let total = 0;
      let failed = 0;
      for (const sweep of sweeps) {
        if (sweep.skipped) process.stdout.write(`skipped\tdocker\t${sweep.skipped}\n`);
        for (const { name, why } of sweep.kept) process.stdout.write(`kept\t${name}\t${why}\n`);
        for (const item of sweep.found) {
          // One item that cannot go (an image a container still uses) stops nothing else.
          const kept = options.dryRun ? undefined : await item.free().then(() => undefined, notFreed);
          if (kept) {
            process.stdout.write(`kept\t${item.name}\t${kept.why}\n`);
            if (!kept.inUse) failed++;
            continue;
          }
          process.stdout.write(`${item.kind}\t${item.name}\t${options.dryRun ? 'would free' : 'freed'} ${mib(item.bytes)}\n`);
          total += item.bytes;
        }
      }
      process.stdout.write(
        `${options.dryRun ? 'would free' : 'freed'} ${mib(total)}${options.dryRun ? ' (dry run: nothing removed)' : ''}\n`,
      );
      if (failed > 0)
        throw new A2rlError(
          'UNAVAILABLE',
          `${failed} of what gc found could not be freed (its kept lines above say why): mend that, then run a2rl gc again.`,
        );
    });
}
