import type Docker from 'dockerode';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { A2rlError } from '../../src/util/errors.js';
import { sha256 } from '../../src/util/hashing.js';
import { packageRoot } from '../../src/util/paths.js';

/** Image definitions in sandbox/images/<name>/Dockerfile, and the tag each is built as. */
export const imageNames = ['micro'] as const;
export type ImageName = (typeof imageNames)[number];
export const imageTag = (name: ImageName) => `a2rl/${name}:latest`;

/** The micro image's base: a Debian root filesystem made here, so no registry is needed. */
export const minbaseTag = 'a2rl/bookworm-minbase:latest';
const debianMirror = 'http://deb.debian.org/debian';

export interface BuildOptions {
  /** Where progress lines go (stderr in the CLI: in stdio mode stdout is the protocol). */
  log: (line: string) => void;
  /** Rebuild even when the image exists. */
  force?: boolean;
}

/**
 * Builds an image definition into the engine, from a debootstrap minbase root filesystem imported into the engine
 * (made once, then reused). The full tier needs no image of its own: its pinned runtime (.venv-full, CUDA torch and
 * vLLM on GPU hosts) is mounted read-only into this one, as into a bubblewrap sandbox.
 */
export async function buildImage(docker: Docker, name: ImageName, options: BuildOptions): Promise<void> {
  const definition = definitionHash(name);
  const built = options.force ? undefined : await builtDefinition(docker, imageTag(name));
  if (built === definition) {
    options.log(`${imageTag(name)} is already built (use --force to rebuild)`);
    return;
  }
  // An image built from an older Dockerfile (an upgraded checkout) is rebuilt, never used as if it were current.
  if (built !== undefined) options.log(`${imageTag(name)} was built from another sandbox/images/${name}/Dockerfile: rebuilding`);
  const buildArgs: Record<string, string> = {};
  if (name === 'micro') {
    if (options.force || !(await hasImage(docker, minbaseTag))) await importMinbase(docker, options.log);
    buildArgs.BASE = minbaseTag;
  }
  options.log(`building ${imageTag(name)} from sandbox/images/${name}/Dockerfile`);
  // The build needs the Debian mirror; the engine has no bridge network here, so builds use the host's.
  const stream = await docker.buildImage(
    { context: join(packageRoot, 'sandbox', 'images', name), src: ['Dockerfile'] },
    {
      t: imageTag(name),
      buildargs: buildArgs,
      labels: { [definitionLabel]: definition },
      networkmode: 'host',
      rm: true,
      forcerm: true,
    },
  );
  await new Promise<void>((resolve, reject) =>
    docker.modem.followProgress(
      stream,
      (error, events: Array<{ error?: string }> | null) => {
        const failed = error?.message ?? events?.find((event) => event.error)?.error;
        if (failed) reject(new A2rlError('SANDBOX_UNAVAILABLE', `Building ${imageTag(name)} failed: ${failed}`));
        else resolve();
      },
      (event: { stream?: string }) => {
        const line = event.stream?.trimEnd();
        if (line) options.log(line);
      },
    ),
  );
  options.log(`built ${imageTag(name)}`);
}

/** The label an image carries with the hash of the Dockerfile it was built from. */
const definitionLabel = 'a2rl.definition-sha256';

const definitionHash = (name: ImageName) => sha256(readFileSync(join(packageRoot, 'sandbox', 'images', name, 'Dockerfile')));

/** The Dockerfile hash the image was built from: undefined when there is no such image, '' when it has no label. */
async function builtDefinition(docker: Docker, tag: string): Promise<string | undefined> {
  try {
    const image = await docker.getImage(tag).inspect();
    return image.Config?.Labels?.[definitionLabel] ?? '';
  } catch {
    return undefined;
  }
}

async function hasImage(docker: Docker, tag: string): Promise<boolean> {
  return (await builtDefinition(docker, tag)) !== undefined;
}

/** debootstrap --variant=minbase bookworm, then `docker import` of the result. */
async function importMinbase(docker: Docker, log: (line: string) => void): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'a2rl-rootfs-'));
  try {
    log(`making a Debian bookworm minbase root filesystem with debootstrap (${debianMirror})`);
    await runTool('debootstrap', ['--variant=minbase', 'bookworm', join(dir, 'root'), debianMirror], log);
    log(`importing it as ${minbaseTag}`);
    const tar = spawn('tar', ['-C', join(dir, 'root'), '-c', '.'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const [repo, tag] = minbaseTag.split(':');
    const stream = await docker.importImage(tar.stdout, { repo, tag });
    await new Promise<void>((resolve, reject) => docker.modem.followProgress(stream, (error) => (error ? reject(error) : resolve())));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function runTool(command: string, args: string[], log: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let tail = '';
    const keep = (chunk: Buffer) => {
      tail = (tail + chunk.toString()).slice(-2000);
      for (const line of chunk.toString().split('\n')) if (line.startsWith('E:')) log(line);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.once('error', (error) =>
      reject(new A2rlError('SANDBOX_UNAVAILABLE', `${command} could not start (${error.message}); install the Debian package ${command}.`)),
    );
    child.once('close', (code) =>
      code === 0
        ? resolve()
        : reject(
            new A2rlError('SANDBOX_UNAVAILABLE', `${command} exited with code ${code} (it needs root and the Debian mirror): ${tail}`),
          ),
    );
  });
}
