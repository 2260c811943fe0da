import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BubblewrapBackend } from '../sandbox/bwrap.js';
import { cgroupsUnavailableReason } from '../sandbox/cgroup.js';
import { type ExecutionItem, executePrograms, executionItemSchema } from '../src/grading/execution.js';
import { getTask, readTaskFile } from '../src/tasks/task.js';
import { tasksRoot } from '../src/util/paths.js';
import { fullTierPython } from './helpers/fixture-hub.js';
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

// HumanEval's form: the grader writes whole programs (prompt, completion, tests, check call), each passing when it
// runs to its end within the task's 3 s. The problems are the fixture hub's (tasks/hflm-tests/fixture_hub.py), the
// programs assembled by hflm.humaneval.build_program, as tasks/humaneval/grader/generate.py assembles them.
describe('running whole programs (HumanEval)', () => {
  const humaneval = readTaskFile(join(tasksRoot, 'humaneval'));
  const program = (id: string, text: string): ExecutionItem => ({ id, split: 'public', program: text });
  const pass = (results: Array<{ passed: number; total: number }>) =>
    (100 * results.filter((r) => r.passed === r.total).length) / results.length;

  /** Every fixture problem's program with its canonical solution as the completion, and with an empty body. */
  function fixturePrograms(): { canonical: ExecutionItem[]; empty: ExecutionItem[] } {
    const script = [
      'import json, sys',
      'sys.path[:0] = [sys.argv[1], sys.argv[1] + "/hflm-tests"]',
      'import fixture_hub',
      'from hflm.humaneval import build_program',
      'rows = fixture_hub.humaneval_rows(fixture_hub.COUNTS["humaneval"])',
      'print(json.dumps({kind: [{"id": r["task_id"], "split": "public", "program": build_program(r, body(r))} for r in rows]',
      '                  for kind, body in (("canonical", lambda r: r["canonical_solution"]), ("empty", lambda r: "    pass\\n"))}))',
    ].join('\n');
    return JSON.parse(execFileSync(fullTierPython, ['-c', script, tasksRoot], { encoding: 'utf8' }));
  }

  it('canonical solutions score 100 and empty bodies 0, each program in a sandbox of its own', { timeout: 300_000 }, async () => {
    const { canonical, empty } = fixturePrograms();
    expect(canonical.length).toBe(164);
    for (const item of [...canonical, ...empty]) expect(executionItemSchema.safeParse(item).success).toBe(true);
    expect(pass(await executePrograms(backend, humaneval, canonical, tempDir('exec')))).toBe(100);
    expect(pass(await executePrograms(backend, humaneval, empty, tempDir('exec')))).toBe(0);
  });

  it('fails a program that raises, exits before its tests, outlasts the limit, or prints the marker', { timeout: 120_000 }, async () => {
    const check = '\ndef check(f):\n    assert f(1) == 2\ncheck(inc)\n';
    const started = Date.now();
    const results = await executePrograms(
      backend,
      humaneval,
      [
        program('right', `def inc(x):\n    return x + 1\n${check}`),
        program('raises', `def inc(x):\n    raise ValueError(x)\n${check}`),
        program('wrong', `def inc(x):\n    return x\n${check}`),
        program('does not compile', `def inc(x):\nreturn x + 1\n${check}`),
        program('sleeps past the limit', `import time\ndef inc(x):\n    time.sleep(10)\n    return x + 1\n${check}`),
        program('ignores the timer', `import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\ntime.sleep(10)\n${check}`),
        program('sys.exit(0) first', `import sys\nsys.exit(0)\n${check}`),
        program('os._exit(0) first', `import os\nos._exit(0)\n${check}`),
        program('has a __main__ block', `def inc(x):\n    return x + 1\nif __name__ == "__main__":\n    inc(input())\n${check}`),
        program('prints the marker', `print("A2RL_PROGRAM_PASSED")\nraise SystemExit(0)\n`),
        program(
          'swallows its own failure',
          `def inc(x):\n    return x\ntry:${check.replace(/\n/g, '\n    ')}\nexcept AssertionError:\n    pass\n`,
        ),
      ],
      tempDir('exec'),
    );
    const passed = Object.fromEntries(results.map((r) => [r.id, r.passed]));
    expect(passed).toEqual({
      right: 1,
      raises: 0,
      wrong: 0,
      'does not compile': 0,
      'sleeps past the limit': 0,
      'ignores the timer': 0,
      'sys.exit(0) first': 0,
      'os._exit(0) first': 0,
      // Skipped, as in the reference (empty globals): it would fail on input() otherwise.
      'has a __main__ block': 1,
      'prints the marker': 0,
      // As in the reference: a program that catches its own test's failure runs to its end.
      'swallows its own failure': 1,
    });
    expect(results.find((r) => r.id === 'ignores the timer')?.failure).toBe('timed out');
    // Two at a time, none past its 3 s and the second to start and end.
    expect(Date.now() - started).toBeLessThan(30_000);
  });

  it('refuses items with calls for a task without a runner package, saying what to write instead', async () => {
    await expect(
      executePrograms(backend, humaneval, [item('calls', 'def f(x):\n    return x\n', [[1]], [1])], tempDir('exec')),
    ).rejects.toThrow(/whole programs, \{"id", "split", "program"\}/);
  });

  it('names the missing field of an item with calls rather than reading it as a whole program', () => {
    const parsed = executionItemSchema.safeParse({ id: 'x', split: 'public', program: 'pass', entry_point: 'f', calls: [[1]] });
    expect(parsed.error?.issues.map((issue) => [issue.path.join('.'), issue.message])).toEqual([
      ['expected', 'an item with calls: Invalid input: expected array, received undefined'],
    ]);
    const stray = executionItemSchema.safeParse({ id: 'x', split: 'public', program: 'pass', check: 'exit' });
    expect(stray.error?.issues[0]?.message).toBe('a whole-program item, {"id", "split", "program"}: Unrecognized key: "check"');
  });
});
