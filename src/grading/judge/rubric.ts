import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SandboxBackend } from '../../../sandbox/contract.js';
import { A2rlError } from '../../util/errors.js';
import { runOnce } from '../run-once.js';
import { libraryMounts, type Task } from '../../tasks/task.js';
import type { Judge, PairwiseQuery, Preference } from './judge.js';

const root = '/opt/a2rl';

/**
 * The task's own deterministic rubric (grader/judge.py), run in a sandbox with nothing
 * but the grader, the libraries and the pairs: outputs are model-written text.
 */
export class RubricJudge implements Judge {
  readonly id = 'rubric';
  readonly kind = 'rubric';

  constructor(
    private readonly backend: SandboxBackend,
    private readonly scratchDir: string,
  ) {}

  async prefer(task: Task, queries: PairwiseQuery[]): Promise<Preference[]> {
    if (!task.grader.judge) throw new A2rlError('GRADING_FAILED', `task ${task.id} ships no rubric judge`);
    const dir = join(this.scratchDir, `judge-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`);
    mkdirSync(join(dir, 'in'), { recursive: true });
    mkdirSync(join(dir, 'out'), { recursive: true });
    try {
      writeFileSync(join(dir, 'in', 'pairs.jsonl'), queries.map((q) => JSON.stringify(q)).join('\n') + '\n');
      const result = await runOnce(this.backend, {
        name: `judge-${task.id}`,
        mounts: [
          { source: task.paths.grader, target: `${root}/grader`, readOnly: true },
          ...libraryMounts(task, root),
          { source: join(dir, 'in'), target: `${root}/in`, readOnly: true },
          { source: join(dir, 'out'), target: `${root}/out`, readOnly: false },
        ],
        env: { PYTHONPATH: `${root}/lib`, PYTHONDONTWRITEBYTECODE: '1' },
        workdir: `${root}/out`,
        argv: [
          '/usr/bin/python3',
          `${root}/grader/${task.grader.judge}`,
          '--pairs',
          `${root}/in/pairs.jsonl`,
          '--out',
          `${root}/out/verdicts.jsonl`,
        ],
        limits: { cpus: 1, memoryBytes: 1024 * 2 ** 20, pids: 32, gpus: [] },
        timeoutMs: task.grader.timeoutSeconds * 1000,
        captureBytes: 4096,
      });
      if (result.exitCode !== 0) {
        throw new A2rlError('GRADING_FAILED', `the rubric judge failed (${result.timedOut ? 'timed out' : `exit ${result.exitCode}`})`);
      }
      const verdicts = new Map<string, Preference>();
      for (const line of readFileSync(join(dir, 'out', 'verdicts.jsonl'), 'utf8').split('\n')) {
        if (!line.trim()) continue;
        const verdict = JSON.parse(line) as { id: string; preference: Preference };
        verdicts.set(verdict.id, verdict.preference);
      }
      return queries.map((q) => {
        const preference = verdicts.get(q.id);
        if (preference !== 'a' && preference !== 'b' && preference !== 'tie') {
          throw new A2rlError('GRADING_FAILED', `the rubric judge gave no verdict for ${q.id}`);
        }
        return preference;
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
}
