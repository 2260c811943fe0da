import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { SandboxBackend } from '../../sandbox/contract.js';
import { DockerBackend } from '../../sandbox/docker.js';
import { describeGpuPath } from '../../sandbox/docker-gpus.js';
import { runOnce } from '../grading/run-once.js';
import { fullTierRuntimeTarget } from '../tasks/full-task.js';
import { packageRoot, tasksRoot } from '../util/paths.js';

const setupFix = 'fix: A2RL_FULL_GPU=1 sh scripts/setup.sh full (CUDA torch and vLLM in .venv-full, on the route gpu-route names)';

/**
 * `a2rl doctor`'s GPU lines, each "ok" or what is wrong and the fix: the GPUs, driver and CUDA nvidia-smi reports; the
 * CUDA route that driver runs (scripts/gpu-route.sh, the lock file setup builds from); the full tier's runtime (its
 * torch's CUDA, vLLM); and, on each working sandbox backend, a job holding GPU 0 that runs hflm's probe (device nodes,
 * NVML, a CUDA kernel, vLLM's import) exactly as a run's GPU job would, on Docker naming how the engine passes GPUs
 * (CDI or --gpus). On a host where nvidia-smi lists no GPU: one line saying so.
 */
export async function gpuReport(backends: ReadonlyArray<{ name: string; backend: SandboxBackend }>): Promise<string[]> {
  const listed = spawnSync('nvidia-smi', ['--query-gpu=index,name,driver_version', '--format=csv,noheader'], {
    encoding: 'utf8',
    timeout: 20_000,
  });
  const gpus = listed.status === 0 ? listed.stdout.trim().split('\n').filter(Boolean) : [];
  if (gpus.length === 0) {
    const why = listed.error
      ? 'nvidia-smi is not installed'
      : listed.status === 0
        ? 'nvidia-smi lists none'
        : listed.stderr.trim() || 'nvidia-smi failed';
    return [`gpu\tno GPU (${why}): the full tier runs only its CPU smoke profiles here`];
  }
  const header = spawnSync('nvidia-smi', { encoding: 'utf8', timeout: 20_000 }).stdout ?? '';
  const driverCuda = /CUDA Version:\s*([\d.]+)/.exec(header)?.[1] ?? 'unknown';
  const [, name, driver] = gpus[0]!.split(',').map((field) => field.trim());
  const lines = [`gpu\tok: ${gpus.length} GPU(s), ${name}; driver ${driver}, which runs CUDA up to ${driverCuda}`];
  const route = spawnSync('sh', [join(packageRoot, 'scripts', 'gpu-route.sh')], { encoding: 'utf8', timeout: 20_000 });
  const [routeName, lockFile, why] = route.stdout.trim().split('\t');
  lines.push(
    route.status === 0
      ? `gpu-route\tok: ${routeName} (${lockFile}): ${why}`
      : `gpu-route\t${route.stderr.trim().replace(/^gpu-route: /, '') || `scripts/gpu-route.sh failed (exit ${route.status})`}`,
  );

  const python = join(packageRoot, '.venv-full', 'bin', 'python');
  if (!existsSync(python)) return [...lines, `gpu-runtime\tmissing: ${python}; ${setupFix}`];
  const versions = spawnSync(
    python,
    [
      '-c',
      'import importlib.metadata as m, torch\ntry: v = m.version("vllm")\nexcept m.PackageNotFoundError: v = None\nprint(torch.__version__, torch.version.cuda, v)',
    ],
    { encoding: 'utf8', timeout: 120_000 },
  );
  const [torch, cuda, vllm] = versions.stdout.trim().split(' ');
  if (versions.status !== 0 || cuda === 'None' || vllm === 'None') {
    const found =
      versions.status === 0
        ? `torch ${torch} (CUDA ${cuda}), vLLM ${vllm === 'None' ? 'not installed' : vllm}`
        : versions.stderr.trim().split('\n').pop();
    lines.push(`gpu-runtime\tnot the GPU runtime: ${found}; ${setupFix}`);
    return lines;
  }
  lines.push(`gpu-runtime\tok: torch ${torch} (CUDA ${cuda}), vLLM ${vllm}`);

  for (const { name: backendName, backend } of backends) {
    const probe = await runOnce(backend, {
      name: 'doctor-gpu',
      mounts: [
        { source: join(packageRoot, '.venv-full'), target: fullTierRuntimeTarget, readOnly: true },
        { source: join(tasksRoot, 'hflm'), target: '/opt/a2rl/lib/hflm', readOnly: true },
      ],
      env: { PATH: `${fullTierRuntimeTarget}/bin:/usr/bin:/bin`, PYTHONPATH: '/opt/a2rl/lib', PYTHONDONTWRITEBYTECODE: '1' },
      workdir: '/tmp',
      argv: [`${fullTierRuntimeTarget}/bin/python`, '-m', 'hflm.gpu'],
      limits: { cpus: 1, memoryBytes: 8 * 2 ** 30, pids: 512, gpus: [0] },
      timeoutMs: 180_000,
      captureBytes: 1 << 16,
    });
    const out = probe.output.trim().split('\n');
    const failed = out.find((line) => line.startsWith('FAILED'));
    const verdict =
      probe.exitCode === 0 && !failed
        ? `ok: a sandboxed job holding GPU 0 ran a CUDA kernel (${out
            .filter((line) => line.startsWith('ok '))
            .slice(-2)
            .join('; ')})`
        : `FAILED: ${failed ?? (probe.timedOut ? 'timed out after 180 s' : `exit ${probe.exitCode ?? probe.signal}: ${out.slice(-2).join(' | ')}`)}`;
    const path = backend instanceof DockerBackend ? `; GPUs passed by ${describeGpuPath(await backend.gpuPath())}` : '';
    lines.push(`gpu-${backendName}\t${verdict}${path}`);
  }
  return lines;
}
