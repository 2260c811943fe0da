import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type Docker from 'dockerode';

/**
 * How the Docker engine hands a container its GPUs, both from the NVIDIA container toolkit: CDI (the engine reads a
 * device spec that `nvidia-ctk cdi generate` wrote, Docker 25 and later with CDI on) where the engine has one naming
 * `nvidia.com/gpu`, else the toolkit's runtime hook that `docker run --gpus` uses.
 */
export type DockerGpuPath = { kind: 'cdi'; specFile: string } | { kind: 'gpus' };

/** What a path is called in `a2rl doctor`'s lines. */
export function describeGpuPath(path: DockerGpuPath): string {
  return path.kind === 'cdi'
    ? `CDI (nvidia.com/gpu=<index> from ${path.specFile})`
    : '--gpus (the NVIDIA container toolkit’s runtime hook; no CDI spec for nvidia.com/gpu in the engine’s CDI folders)';
}

/** The path an engine with these CDI folders (`docker info`'s CDISpecDirs: empty where CDI is off) takes. */
export function gpuPathOf(cdiSpecDirs: string[] | undefined): DockerGpuPath {
  for (const dir of cdiSpecDirs ?? []) {
    let files: string[];
    try {
      files = readdirSync(dir).filter((file) => /\.(ya?ml|json)$/.test(file));
    } catch {
      continue;
    }
    for (const file of files.sort()) {
      try {
        if (/"?kind"?\s*:\s*"?nvidia\.com\/gpu"?/.test(readFileSync(join(dir, file), 'utf8')))
          return { kind: 'cdi', specFile: join(dir, file) };
      } catch {
        // An unreadable spec is the engine's to report; it is not ours to use.
      }
    }
  }
  return { kind: 'gpus' };
}

/** The engine's path, asked once; an engine that does not answer is taken to have the runtime hook (the old default). */
export async function engineGpuPath(docker: Docker): Promise<DockerGpuPath> {
  try {
    const info = (await docker.info()) as { CDISpecDirs?: string[] };
    return gpuPathOf(info.CDISpecDirs);
  } catch {
    return { kind: 'gpus' };
  }
}

/** The container's device request for these host GPU indices (nvidia-smi's). */
export function gpuDeviceRequest(gpus: number[], path: DockerGpuPath): Docker.DeviceRequest {
  return path.kind === 'cdi'
    ? { Driver: 'cdi', DeviceIDs: gpus.map((gpu) => `nvidia.com/gpu=${gpu}`) }
    : { Driver: 'nvidia', DeviceIDs: gpus.map(String), Capabilities: [['gpu']] };
}
