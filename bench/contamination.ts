import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { loadavg } from 'node:os';
import { checkContamination } from '../src/integrity/check.js';
import { Store } from '../src/store/store.js';
import { tasksRoot } from '../src/util/paths.js';

/**
 * The contamination check's cost on a run with a 1 GB workspace (issue 37), measured in this process (the worker
 * thread a server uses adds its start, tens of milliseconds): once with 1 GB of text (the worst case: every byte is
 * tokenised; the task's training data written again and again, as JSONL) and once with 100 MB of text beside 900 MB
 * of checkpoint-like binary files (read to be counted, never tokenised). Wall and CPU seconds, and the largest
 * resident memory the process reached.
 */
export function contaminationCheckCost(home: string, taskId = 'micro-gsm8k') {
  const train = readFileSync(join(tasksRoot, taskId, 'data', 'train.jsonl'));
  const measure = (name: string, textBytes: number, binaryBytes: number) => {
    const dir = join(home, 'contamination', name);
    const workspace = join(dir, 'workspace');
    mkdirSync(join(workspace, 'output'), { recursive: true });
    const fill = (path: string, bytes: number, block: Buffer) => {
      const fd = openSync(path, 'w');
      for (let written = 0; written < bytes; written += block.length) writeSync(fd, block);
      closeSync(fd);
    };
    // Text in files of 100 MB, binary in files of 300 MB: as a workspace of data files and checkpoints holds them.
    for (let i = 0; i * 100e6 < textBytes; i++)
      fill(join(workspace, 'output', `data-${i}.jsonl`), Math.min(100e6, textBytes - i * 100e6), train);
    const binary = Buffer.alloc(1 << 20, 7);
    binary[0] = 0;
    for (let i = 0; i * 300e6 < binaryBytes; i++)
      fill(join(workspace, 'output', `weights-${i}.bin`), Math.min(300e6, binaryBytes - i * 300e6), binary);
    const store = new Store(join(dir, 'store.sqlite'));
    try {
      store.insertRun({
        id: name,
        task_id: taskId,
        label: null,
        budget: '{}',
        dir,
        sandbox: 'bwrap',
        grader_version: 'bench',
        owner: 'none',
        created_at: Date.now(),
      });
      const load = loadavg()[0]!;
      const cpu = process.cpuUsage();
      const started = process.hrtime.bigint();
      const details = checkContamination(store, home, name);
      const wall = Number(process.hrtime.bigint() - started) / 1e9;
      const used = process.cpuUsage(cpu);
      return {
        text_bytes: details.coverage.bytes,
        binary_bytes: details.coverage.binary_bytes,
        matched: details.matched,
        wall_s: Math.round(wall * 100) / 100,
        cpu_s: Math.round(((used.user + used.system) / 1e6) * 100) / 100,
        text_mb_per_cpu_s: Math.round(details.coverage.bytes / 1e6 / ((used.user + used.system) / 1e6)),
        max_rss_mib: Math.round(process.resourceUsage().maxRSS / 1024),
        load_average_1m_before: Math.round(load * 100) / 100,
      };
    } finally {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  };
  return {
    task: taskId,
    text_1gb: measure('text-1gb', 1e9, 0),
    text_100mb_binary_900mb: measure('mixed-1gb', 100e6, 900e6),
  };
}
