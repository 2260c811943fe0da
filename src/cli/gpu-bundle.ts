import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { A2rlError } from '../util/errors.js';
import { packageRoot } from '../util/paths.js';

/**
 * `a2rl prepare --bundle DIR`, on a machine with an index: every wheel the full tier's runtime needs for a GPU host's
 * route, so that host builds .venv-full with no network (`A2RL_WHEELS=DIR/wheels sh scripts/setup.sh full`, and so
 * `bench/gpu-check.sh offline`, whose model and dataset are fixtures made on the spot). The layout:
 *
 *   DIR/wheels/         the wheels of the lock file and of everything it pins (binary only: the GPU host builds nothing)
 *   DIR/requirements.txt  the lock file they were downloaded for
 *   DIR/bundle.json     its route, the lock file's path and sha256, this machine's Python and architecture
 *
 * The wheels are this machine's platform and Python's: bundle on one like the GPU host (Debian 12, x86_64, 3.11).
 */
export interface BundleOptions {
  /** cu126, cu128, cu130 (the GPU host's: `scripts/gpu-route.sh` there says which), or cpu; default: this host's. */
  route?: string;
  /** A lock file of one's own instead of a route's. */
  requirements?: string;
}

const cpuLockFile = 'tasks/hflm/requirements.txt';
/** The routes scripts/gpu-route.sh knows, and the CPU runtime's. */
const routes = ['cu126', 'cu128', 'cu130', 'cpu'];
const fullTierPython = join(packageRoot, '.venv-full', 'bin', 'python');

/** Writes the bundle and returns the lines that say what it holds and how to use it. */
export function writeBundle(dir: string, options: BundleOptions): string[] {
  const { route, lockFile } = bundleLockFile(options);
  if (!existsSync(fullTierPython)) {
    throw new A2rlError(
      'UNAVAILABLE',
      `${fullTierPython} is missing (its pip downloads the wheels): run scripts/setup.sh full, then bundle again.`,
    );
  }
  const target = resolve(dir);
  const wheels = join(target, 'wheels');
  mkdirSync(wheels, { recursive: true });
  // PIP_RETRIES=0: an index that cannot be reached fails at once instead of being retried for minutes.
  const download = spawnSync(
    fullTierPython,
    ['-m', 'pip', 'download', '--no-input', '--disable-pip-version-check', '--only-binary=:all:', '-r', lockFile, '-d', wheels],
    { stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, PIP_RETRIES: '0' } },
  );
  if (download.status !== 0) {
    throw new A2rlError(
      'UNAVAILABLE',
      `pip could not download every wheel of ${lockFile} (its error is above); fix that, then bundle again.`,
    );
  }
  const lock = readFileSync(lockFile);
  copyFileSync(lockFile, join(target, 'requirements.txt'));
  const python = spawnSync(fullTierPython, ['-c', 'import sys; print("%d.%d" % sys.version_info[:2])'], { encoding: 'utf8' }).stdout.trim();
  const count = readdirSync(wheels).filter((file) => file.endsWith('.whl')).length;
  const manifest = {
    route,
    lock_file: relative(packageRoot, lockFile),
    lock_sha256: createHash('sha256').update(lock).digest('hex'),
    python,
    architecture: process.arch,
    wheels: count,
  };
  writeFileSync(join(target, 'bundle.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  return [
    `bundle: ${count} wheels in ${wheels} for ${manifest.lock_file} (route ${route}, Python ${python}, ${process.arch})`,
    `on the GPU host, with no network: A2RL_WHEELS=${wheels}${route === 'custom' ? '' : ` A2RL_GPU_ROUTE=${route}`} sh bench/gpu-check.sh offline`,
  ];
}

/** The route and the lock file to bundle, decided before anything is downloaded; "no route" is refused here. */
function bundleLockFile(options: BundleOptions): { route: string; lockFile: string } {
  if (options.requirements !== undefined) {
    if (options.route !== undefined) throw new A2rlError('INVALID_INPUT', 'Give --route or --requirements, not both.');
    const lockFile = resolve(options.requirements);
    if (!existsSync(lockFile)) throw new A2rlError('INVALID_INPUT', `No lock file at ${lockFile}; give --requirements an existing file.`);
    return { route: 'custom', lockFile };
  }
  if (options.route !== undefined && !routes.includes(options.route)) {
    throw new A2rlError('INVALID_INPUT', `--route ${options.route} is no route; name ${routes.join(', ')}. Nothing was downloaded.`);
  }
  if (options.route === 'cpu') return { route: 'cpu', lockFile: join(packageRoot, cpuLockFile) };
  const chosen = spawnSync('sh', [join(packageRoot, 'scripts', 'gpu-route.sh')], {
    encoding: 'utf8',
    env: { ...process.env, A2RL_GPU_ROUTE: options.route ?? '' },
  });
  if (chosen.status !== 0) {
    const why = chosen.stderr.trim().replace(/^gpu-route: /, '');
    throw new A2rlError(
      'INVALID_INPUT',
      `Nothing was downloaded: ${why}. Name the GPU host's route with --route cu126, cu128 or cu130 (scripts/gpu-route.sh on that host says which), or --route cpu.`,
    );
  }
  const [route, lockFile] = chosen.stdout.trim().split('\t');
  return { route: route!, lockFile: join(packageRoot, lockFile!) };
}
