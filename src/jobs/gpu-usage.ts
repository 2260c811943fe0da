import { execFile } from 'node:child_process';

export interface GpuReading {
  index: number;
  utilization_percent: number;
  memory_used_mib: number;
}

/** Parses `nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader,nounits`. */
export function parseNvidiaSmi(text: string): GpuReading[] {
  return text
    .trim()
    .split('\n')
    .filter((line) => line.trim())
    .flatMap((line) => {
      const [index, utilization, memory] = line.split(',').map((field) => Number(field.trim()));
      return [index, utilization, memory].every((n) => Number.isFinite(n))
        ? [{ index: index!, utilization_percent: utilization!, memory_used_mib: memory! }]
        : [];
    });
}

/**
 * The latest GPU readings, refreshed in the background: sampling jobs stays synchronous,
 * and a host without nvidia-smi is asked once, then never again.
 */
export class GpuMonitor {
  private latest = new Map<number, GpuReading>();
  private querying = false;
  private absent = false;

  /** Readings of the given GPUs (possibly a few seconds old); empty where none are known. */
  readings(gpus: readonly number[]): GpuReading[] {
    if (gpus.length > 0) this.refresh();
    return gpus.flatMap((gpu) => this.latest.get(gpu) ?? []);
  }

  private refresh(): void {
    if (this.querying || this.absent) return;
    this.querying = true;
    execFile(
      'nvidia-smi',
      ['--query-gpu=index,utilization.gpu,memory.used', '--format=csv,noheader,nounits'],
      { timeout: 5000 },
      (error, stdout) => {
        this.querying = false;
        if (error) {
          if ((error as NodeJS.ErrnoException).code === 'ENOENT') this.absent = true;
          return;
        }
        this.latest = new Map(parseNvidiaSmi(stdout).map((reading) => [reading.index, reading]));
      },
    );
  }
}
