import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The README's task table is rendered from tasks/*/task.json by scripts/task-table.mjs.
const root = fileURLToPath(new URL('..', import.meta.url));
const script = join(root, 'scripts', 'task-table.mjs');
const tableScript = (...args: string[]) => spawnSync(process.execPath, [script, ...args], { encoding: 'utf8' });

describe('README task table', () => {
  it('matches the task.json files (else run: node scripts/task-table.mjs)', () => {
    const result = tableScript('--check');
    expect(result.status, result.stderr).toBe(0);
  });

  it('--check fails, naming the command, when a task.json changes, and rendering brings the table up to date', () => {
    const copy = mkdtempSync(join(tmpdir(), 'a2rl-task-table-'));
    try {
      writeFileSync(join(copy, 'README.md'), readFileSync(join(root, 'README.md')));
      const ids: string[] = [];
      const fullIds: string[] = [];
      for (const entry of readdirSync(join(root, 'tasks'), { withFileTypes: true })) {
        const dir = join(root, 'tasks', entry.name);
        const declaration = ['task.json', 'task.template.json'].find((name) => entry.isDirectory() && existsSync(join(dir, name)));
        if (!declaration) continue;
        mkdirSync(join(copy, 'tasks', entry.name), { recursive: true });
        writeFileSync(join(copy, 'tasks', entry.name, declaration), readFileSync(join(dir, declaration)));
        const tier = declaration === 'task.json' ? JSON.parse(readFileSync(join(dir, declaration), 'utf8')).tier : undefined;
        if (tier === 'micro') ids.push(entry.name);
        if (tier === 'full') fullIds.push(entry.name);
      }
      expect(tableScript('--check', '--root', copy).status).toBe(0);

      const file = join(copy, 'tasks', ids[0]!, 'task.json');
      const task = JSON.parse(readFileSync(file, 'utf8'));
      task.figures.baseline.public = 99.25;
      task.summary = 'a changed summary';
      task.oracles[0].compute = { cpuSeconds: 1234.4, wallSeconds: 150, rolloutEpisodes: 2000 };
      writeFileSync(file, JSON.stringify(task, null, 2));
      const stale = tableScript('--check', '--root', copy);
      expect(stale.status).toBe(1);
      expect(stale.stderr).toContain('node scripts/task-table.mjs');

      expect(tableScript('--root', copy).status).toBe(0);
      const readme = readFileSync(join(copy, 'README.md'), 'utf8');
      expect(readme).toContain(`| \`${ids[0]}\``);
      expect(readme).toContain(`(a changed summary)`);
      expect(readme).toContain(`99.25 / ${task.figures.baseline.private} ${task.metric}`);
      expect(readme).toContain(`${task.oracles[0].measured}; 1,234 CPU-s, 2.5 min, 2,000 episodes`);
      expect(readme).not.toContain('micro-example'); // tasks/_template holds no task.json: not a task
      const microTable = readme.slice(readme.indexOf('<!-- tasks:begin -->'), readme.indexOf('<!-- tasks:end -->'));
      expect(microTable).not.toContain('| `gsm8k`'); // a full-tier task: in the full tier's table only
      expect(tableScript('--check', '--root', copy).status).toBe(0);

      // The full tier's table: a changed GPU memory figure is stale until rendered; a task without one is named.
      const fullFile = join(copy, 'tasks', fullIds[0]!, 'task.json');
      const full = JSON.parse(readFileSync(fullFile, 'utf8'));
      full.gpuMemory = 'two 80 GB GPUs';
      writeFileSync(fullFile, JSON.stringify(full, null, 2));
      expect(tableScript('--check', '--root', copy).status).toBe(1);
      expect(tableScript('--root', copy).status).toBe(0);
      const fullTable = readFileSync(join(copy, 'README.md'), 'utf8').split('<!-- full-tasks:begin -->')[1]!;
      expect(fullTable).toMatch(new RegExp(`\\| \`${fullIds[0]}\` .*\\| \`a2rl prepare ${fullIds[0]}\` .*\\| two 80 GB GPUs `));
      delete full.upstreamStatus;
      writeFileSync(fullFile, JSON.stringify(full, null, 2));
      const lacking = tableScript('--check', '--root', copy);
      expect(lacking.status).toBe(2);
      expect(lacking.stderr).toContain(`${fullFile} lacks upstreamStatus`);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });
});
