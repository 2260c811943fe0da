import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DockerBackend } from '../sandbox/docker.js';
import { venvPythonVersion } from '../sandbox/venv-python.js';
import { prepareDocker } from './helpers/docker.js';
import { liveOwner, tempDir } from './helpers/sandbox.js';

const unavailable = await prepareDocker();

// The full tier's .venv-full is mounted into the image and runs with the image's Python (finding 10 of issue 35).
describe.skipIf(unavailable)(
  `docker backend: a mounted virtual environment and the image's Python${unavailable ? ` (skipped: ${unavailable})` : ''}`,
  () => {
    const backend = new DockerBackend({ owner: liveOwner });
    afterAll(() => backend.dispose());

    const spec = (venv: string) => ({
      name: 'venv-python',
      mounts: [{ source: venv, target: '/opt/a2rl/venv', readOnly: true }],
      hidden: [],
      env: {},
      workdir: '/tmp',
    });

    it('refuses, before creating anything, an environment built with another Python than the image’s, naming the fix', async () => {
      // A copy of .venv-full's configuration as another host's Python would have written it.
      const other = tempDir('venv-other');
      mkdirSync(join(other, 'bin'));
      writeFileSync(join(other, 'pyvenv.cfg'), 'home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.12.3\n');
      const before = await backend.docker.listContainers({ all: true, filters: { label: [`a2rl.owner=${liveOwner}`] } });
      await expect(backend.create(spec(other))).rejects.toThrow(
        new RegExp(
          `^${other} \\(mounted at /opt/a2rl/venv\\) was built with Python 3\\.12, but the image a2rl/micro:latest runs Python 3\\.11, which cannot load its packages\\. Serve with --sandbox bwrap .*or build ${other} with Python 3\\.11`,
        ),
      );
      const after = await backend.docker.listContainers({ all: true, filters: { label: [`a2rl.owner=${liveOwner}`] } });
      expect(after.map((c) => c.Id)).toEqual(before.map((c) => c.Id));
    });

    it('looks only at read-only mounts: a pyvenv.cfg the agent wrote in its writable workspace is no runtime', async () => {
      const workspace = tempDir('venv-workspace');
      writeFileSync(join(workspace, 'pyvenv.cfg'), 'version = 3.99.0\n');
      const sandbox = await backend.create({ ...spec(workspace), mounts: [{ source: workspace, target: '/workspace', readOnly: false }] });
      await sandbox.destroy();
    });

    it('creates the sandbox for an environment built with the image’s Python (Debian 12’s 3.11, as setup.sh builds .venv-full there)', async () => {
      const same = tempDir('venv-same');
      writeFileSync(join(same, 'pyvenv.cfg'), 'home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11.2\n');
      expect(venvPythonVersion(same)).toBe('3.11');
      const sandbox = await backend.create(spec(same));
      await sandbox.destroy();
    });
  },
);

// Every mount's folder is looked at, and the agent can write into some: the server must neither follow nor wait.
describe('venvPythonVersion on what an agent can leave as pyvenv.cfg', () => {
  it('reads a regular file only: a link is not followed and a FIFO is not waited on', () => {
    const real = tempDir('venv-real');
    writeFileSync(join(real, 'pyvenv.cfg'), 'version_info = 3.11.2.final.0\n');
    expect(venvPythonVersion(real)).toBe('3.11');
    const linked = tempDir('venv-link');
    symlinkSync(join(real, 'pyvenv.cfg'), join(linked, 'pyvenv.cfg'));
    expect(venvPythonVersion(linked)).toBeUndefined();
    const fifo = tempDir('venv-fifo');
    execFileSync('mkfifo', [join(fifo, 'pyvenv.cfg')]);
    expect(venvPythonVersion(fifo)).toBeUndefined(); // a blocking read would never return: no writer opens it
    expect(venvPythonVersion(tempDir('venv-none'))).toBeUndefined();
  });
});
