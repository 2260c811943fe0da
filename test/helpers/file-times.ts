import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';

/** Jiffies all CPUs spent busy and in all, from /proc/stat's first line (0s where there is none). */
function cpuJiffies(): { busy: number; total: number } {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const total = fields.reduce((sum, value) => sum + value, 0);
    return { busy: total - fields[3]! - fields[4]!, total };
  } catch {
    return { busy: 0, total: 0 };
  }
}

/**
 * Prints, after the run, each file's wall time (its import, then its first test to its last), the slowest first, and how busy the
 * machine's CPUs were over the run: CI shows only the end of its output, and the suite's time budget is spent by files.
 */
export class FileTimes implements Reporter {
  private readonly started = new Map<string, number>();
  private readonly walls = new Map<string, number>();
  private runStarted = 0;
  private cpuAtStart = { busy: 0, total: 0 };

  onTestRunStart(): void {
    this.runStarted = Date.now();
    this.cpuAtStart = cpuJiffies();
  }

  onTestModuleStart(module: TestModule): void {
    this.started.set(module.moduleId, Date.now());
  }

  onTestModuleEnd(module: TestModule): void {
    // The tests' span, plus the import before them (a file's top-level awaits: an engine started, an image built).
    const { environmentSetupDuration, prepareDuration, collectDuration, setupDuration } = module.diagnostic();
    const importMs = environmentSetupDuration + prepareDuration + collectDuration + setupDuration;
    this.walls.set(module.moduleId, Date.now() - (this.started.get(module.moduleId) ?? Date.now()) + importMs);
  }

  onTestRunEnd(): void {
    const cpu = cpuJiffies();
    const busy = cpu.total > this.cpuAtStart.total ? (cpu.busy - this.cpuAtStart.busy) / (cpu.total - this.cpuAtStart.total) : 0;
    const rows = [...this.walls].sort((a, b) => b[1] - a[1]).slice(0, 30);
    const lines = rows.map(([id, wall]) => `${(wall / 1000).toFixed(0).padStart(6)} s  ${relative(process.cwd(), id)}`);
    const total = ((Date.now() - this.runStarted) / 1000).toFixed(0);
    process.stdout.write(
      `\nSlowest files (wall: import, then first test to last), of ${this.walls.size}; the run took ${total} s, its CPUs ${(busy * 100).toFixed(0)}% busy:\n${lines.join('\n')}\n`,
    );
  }
}
