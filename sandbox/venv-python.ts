import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import type Docker from 'dockerode';
import type { Mount } from './contract.js';

/**
 * A Python virtual environment mounted into an image (the full tier's `.venv-full`) runs with the image's own
 * Python: its `bin/python3` links to `/usr/bin/python3`, and its packages lie under `lib/python<major>.<minor>/`.
 * An image whose Python is another minor version than the one that built the environment finds none of them, and
 * every job would fail on its first import. The Docker backend checks this before it creates a sandbox.
 */

/** Most of a `pyvenv.cfg` read: a real one is a few lines. */
const maxConfigBytes = 64 * 1024;

/**
 * The Python version (`3.11`) a folder's `pyvenv.cfg` names; undefined where the folder is no virtual environment.
 * Every mount's folder is looked at, the run's writable workspace too: a link or a FIFO the agent named pyvenv.cfg
 * there is neither followed nor waited on (O_NOFOLLOW, O_NONBLOCK, regular files only), and at most 64 KiB is read.
 */
export function venvPythonVersion(folder: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(join(folder, 'pyvenv.cfg'), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  let config: string;
  try {
    if (!fstatSync(fd).isFile()) return undefined;
    const buffer = Buffer.alloc(maxConfigBytes);
    config = buffer.subarray(0, readSync(fd, buffer, 0, maxConfigBytes, 0)).toString('utf8');
  } finally {
    closeSync(fd);
  }
  const match = /^version(?:_info)?\s*=\s*(\d+)\.(\d+)/m.exec(config);
  return match ? `${match[1]}.${match[2]}` : undefined;
}

/** Why the image's Python cannot run a virtual environment among the mounts, with the fix; undefined when it can. */
export function venvMismatch(mounts: Mount[], image: string, imagePython: string): string | undefined {
  for (const mount of mounts) {
    const built = venvPythonVersion(mount.source);
    if (built === undefined || built === imagePython) continue;
    return (
      `${mount.source} (mounted at ${mount.target}) was built with Python ${built}, but the image ${image} runs Python ` +
      `${imagePython}, which cannot load its packages. Serve with --sandbox bwrap (it runs this host's own Python), or ` +
      `build ${mount.source} with Python ${imagePython}, the image's (scripts/setup.sh builds it with /usr/bin/python3: ` +
      `run it on a host whose python3 is ${imagePython}, e.g. Debian 12)`
    );
  }
  return undefined;
}

/** The image's `python3` version (`3.11`), read by running it once in a container of its own, with no network. */
export async function imagePythonVersion(docker: Docker, image: string, containerLabels: Record<string, string>): Promise<string> {
  const container = await docker.createContainer({
    Image: image,
    Entrypoint: [],
    // Not the bare version: the engine client reads an answer that parses as JSON as JSON ("3.11" as a number).
    Cmd: ['python3', '-c', 'import sys; print("python %d.%d" % sys.version_info[:2])'],
    Labels: containerLabels,
    Tty: true, // one raw stream: the logs carry no multiplexing headers
    NetworkDisabled: true,
    HostConfig: { NetworkMode: 'none', ReadonlyRootfs: true, CapDrop: ['ALL'] },
  });
  try {
    await container.start();
    const { StatusCode } = (await container.wait()) as { StatusCode: number };
    const logs: unknown = await container.logs({ stdout: true, stderr: true });
    const output = (Buffer.isBuffer(logs) ? logs.toString('utf8') : String(logs)).trim();
    const version = /^python (\d+\.\d+)$/.exec(output)?.[1];
    if (StatusCode !== 0 || version === undefined) {
      throw new Error(`the image ${image} has no working python3 (it answered "${output.slice(0, 200)}", exit status ${StatusCode})`);
    }
    return version;
  } finally {
    await container.remove({ force: true }).catch(() => undefined);
  }
}
