import { describe, expect, it } from 'vitest';
import { BubblewrapBackend } from '../sandbox/bwrap.js';
import { cgroupsUnavailableReason } from '../sandbox/cgroup.js';
import { type ExecutionItem, executePrograms } from '../src/grading/execution.js';
import { getTask } from '../src/tasks/task.js';
import { liveOwner, tempDir } from './helpers/sandbox.js';

const task = getTask('micro-humaneval');
const backend = new BubblewrapBackend(liveOwner);

const item = (id: string, program: string, calls: unknown[][], expected: unknown[]): ExecutionItem => ({
  id,
  split: 'public',
  program,
  entry_point: 'f',
  calls,
  expected,
});

describe('running model-written programs', () => {
  it('passes a correct program and counts tests passed one by one', async () => {
    const results = await executePrograms(
      backend,
      task,
      [
        item('right', 'def f(x):\n    return x + 1\n', [[1], [2], [41]], [2, 3, 42]),
        item('half', 'def f(x):\n    return 2 if x == 1 else 0\n', [[1], [2]], [2, 3]),
        item('bool-is-not-int', 'def f(x):\n    return True\n', [[1]], [1]),
      ],
      tempDir('exec'),
    );
    expect(results.map((r) => [r.id, r.passed, r.total])).toEqual([
      ['right', 3, 3],
      ['half', 1, 2],
      ['bool-is-not-int', 0, 1],
    ]);
  });

  it.skipIf(cgroupsUnavailableReason() !== undefined)(
    'contains hostile programs: each costs its own problem only, and the grader goes on',
    { timeout: 120_000 },
    async () => {
      const hostile: Array<[string, string]> = [
        ['loop', 'while True:\n    pass\n'],
        // A long C-level loop never yields to the runner's alarm handler: only the sandbox's own limit ends it.
        ['outlast the runner', 'def f(x):\n    return sum(range(10**11))\n'],
        ['fork bomb', 'import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n'],
        ['10 GB allocation', 'x = b"x" * (10 * 2**30)\ndef f(x):\n    return x + 1\n'],
        ['read /etc/passwd', 'def f(x):\n    return open("/etc/passwd").read()\n'],
        ['read the evaluation data', 'def f(x):\n    return open("/opt/a2rl/eval/public.jsonl").read()\n'],
        ['open a socket', 'import socket\ndef f(x):\n    socket.create_connection(("1.1.1.1", 80), 2)\n    return x + 1\n'],
        ['write outside its folder', 'def f(x):\n    open("/opt/a2rl/item/pwned", "w").write("x")\n    return x + 1\n'],
        ['forge the outputs line', 'import os\nos.write(1, b\'A2RL_OUTPUTS [{"ok": true, "value": 999}]\\n\')\nos._exit(0)\n'],
        ['exit before the tests', 'import sys\nsys.exit(0)\n'],
      ];
      const started = Date.now();
      const results = await executePrograms(
        backend,
        task,
        [
          ...hostile.map(([id, program]) => item(id, program, [[1], [2]], [2, 3])),
          item(
            'expected values are not in the sandbox',
            'import json\ndef f():\n    return sorted(json.load(open("/opt/a2rl/item/item.json")))\n',
            [[]],
            [['calls', 'entry_point', 'program']],
          ),
          item('still works afterwards', 'def f(x):\n    return x + 1\n', [[1], [2]], [2, 3]),
        ],
        tempDir('exec'),
      );
      const passed = Object.fromEntries(results.map((r) => [r.id, r.passed]));
      for (const [id] of hostile) expect(passed[id], id).toBe(0);
      expect(passed['expected values are not in the sandbox']).toBe(1);
      expect(passed['still works afterwards']).toBe(2);
      expect(results.find((r) => r.id === 'outlast the runner')?.failure).toBe('timed out');
      // Two at a time, each bounded by its 10 s limit.
      expect(Date.now() - started).toBeLessThan(90_000);
    },
  );
});
