import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import fc from 'fast-check';
import { lstatSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/util/paths.js';
import { tools } from '../../tools/index.js';
import { call, type CallResult } from '../helpers/mcp.js';
import { tempDir } from '../helpers/sandbox.js';
import { backends, recordFigure, sleep, stdioRun, waitBaseline, withStore } from './harness.js';

/** Cases per tool; CI keeps it small, a longer hunt sets A2RL_FUZZ_RUNS. */
const runsPerTool = Number(process.env.A2RL_FUZZ_RUNS ?? 30);
/** Longest a call may take beyond what it asked to wait for. */
const hangMs = 5000;

const pathTricks = [
  '',
  '.',
  '..',
  '../',
  '/',
  '/etc/passwd',
  '/workspace',
  '/workspace/..',
  '/workspace/../etc/shadow',
  'code/../..',
  'code/../../store.sqlite',
  '~/x',
  '~root',
  '\0',
  'code/\0x',
  'code/hello.txt',
  'code',
  'code/a\nb',
  ' code/x ',
  'code//x',
  './code/./x',
  'code/..\\..\\x',
  '%2e%2e/x',
  'data/train.jsonl',
  'models/base',
  'models/base/model.pt',
  'instructions.md',
  'instructions.md/x',
  'lib/microlm',
  `code/${'a'.repeat(300)}`,
  'a/'.repeat(2000),
  'code/ä/日本/🙂.txt',
  'code/\u202etxt.py',
  'code/\ud800',
  'output',
  'job-1',
  'job--1',
  'job-0',
  'job-99999999999999999999999',
  'job-1e3',
  ' JOB-1 ',
  'sub-1',
  'sub--1',
  'sub-0x1',
  'best',
];

/** Strings an attacker sends: random text of every kind, path tricks, and huge ones. */
const adversarialString = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme' }),
  fc.string({ unit: 'binary', maxLength: 64 }),
  fc.constantFrom(...pathTricks),
  fc.string({ unit: 'grapheme-ascii' }).map((s) => `code/${s}`),
  fc.constantFrom('x'.repeat(1024 * 1024 + 1), 'é'.repeat(200_000), '../'.repeat(20_000), '\0'.repeat(10_000)),
);

const adversarialNumber = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true }),
  fc.constantFrom(-1, 0, -0, 0.5, 1e-300, 1e308, -1e308, 2 ** 53 + 1, 51, 601, 10_001, 1441),
);

/** A deeply nested value, past what a careless recursive validator survives. */
const deep = (depth: number): unknown => {
  let value: unknown = 'bottom';
  for (let i = 0; i < depth; i++) value = i % 2 ? [value] : { a: value };
  return value;
};

const anyValue = fc.oneof(
  adversarialString,
  adversarialNumber,
  fc.constantFrom(null, true, false, [], {}, deep(50), deep(2000)),
  fc.anything({ maxDepth: 4 }),
);

interface JsonSchemaProperty {
  type?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  enum?: unknown[];
}

/** Values of the property's own type (in and out of its range), or anything at all. */
function propertyArbitrary(property: JsonSchemaProperty): fc.Arbitrary<unknown> {
  const typed: fc.Arbitrary<unknown>[] = [];
  if (property.type === 'string') typed.push(adversarialString);
  if (property.type === 'integer' || property.type === 'number') {
    const min = property.minimum ?? property.exclusiveMinimum ?? -1e6;
    const max = Math.min(property.maximum ?? 1e6, 1e9);
    const inRange =
      property.type === 'integer' ? fc.integer({ min: Math.ceil(min), max: Math.floor(max) }) : fc.double({ min, max, noNaN: true });
    typed.push(fc.oneof({ arbitrary: inRange, weight: 3 }, { arbitrary: adversarialNumber, weight: 1 }));
  }
  if (property.type === 'boolean') typed.push(fc.boolean());
  // Mostly the right type, so that calls get past validation into the handlers; sometimes anything at all.
  return fc.oneof({ arbitrary: fc.oneof(...(typed.length ? typed : [anyValue])), weight: 6 }, { arbitrary: anyValue, weight: 1 });
}

function argumentsArbitrary(schema: { properties?: Record<string, JsonSchemaProperty> }): fc.Arbitrary<Record<string, unknown>> {
  const properties = schema.properties ?? {};
  const known = fc.record(Object.fromEntries(Object.entries(properties).map(([key, property]) => [key, propertyArbitrary(property)])), {
    requiredKeys: [],
  }) as fc.Arbitrary<Record<string, unknown>>;
  const extra = fc.dictionary(fc.oneof(fc.string(), fc.constantFrom('__proto__', 'constructor', 'path', 'PATH')), anyValue, {
    maxKeys: 2,
  });
  return fc.oneof({ arbitrary: known, weight: 4 }, { arbitrary: fc.tuple(known, extra).map(([a, b]) => ({ ...b, ...a })), weight: 1 });
}

/** What a call may wait for on purpose (wait_seconds, an exec's timeout), in ms. */
function requestedWaitMs(tool: string, args: Record<string, unknown>): number {
  const seconds = (value: unknown, max: number) => (typeof value === 'number' && value >= 0 && value <= max ? value : 0);
  if (tool === 'exec') return (seconds(args.timeout_s, 45) || 30) * 1000 + 5000;
  if (tool === 'job_status' || tool === 'get_score') return seconds(args.wait_seconds, 50) * 1000;
  return 0;
}

describe.each(backends)('fuzzed tool inputs (%s)', (backend) => {
  const home = tempDir('rt-fuzz');
  let client: Client;
  let runId: string;
  let workspace: string;

  /** What a rejected call must leave as it was: workspace files, the store but for the tool-call record, stored snapshots. */
  function state(): string {
    const files: string[] = [];
    const walk = (dir: string, prefix: string) => {
      for (const name of readdirSync(dir).sort()) {
        const stats = lstatSync(join(dir, name));
        files.push(`${prefix}${name}:${stats.size}:${stats.mtimeMs}`);
        if (stats.isDirectory()) walk(join(dir, name), `${prefix}${name}/`);
      }
    };
    walk(workspace, '');
    walk(join(home, 'submissions'), 'stored:');
    const store = withStore(home, (s) =>
      ['runs', 'jobs', 'submissions', 'grades', 'run_tokens'].map((table) => s.db.prepare(`SELECT * FROM ${table}`).all()),
    );
    const events = withStore(home, (s) =>
      s.db.prepare("SELECT kind, name, data FROM events WHERE run_id = ? AND kind NOT IN ('tool', 'session')").all(runId),
    );
    return JSON.stringify({ files, store, events });
  }

  /** Waits for the jobs an accepted call started, so the next comparison sees only that call's doing. */
  async function settle(): Promise<void> {
    for (let i = 0; i < 200; i++) {
      const running = withStore(home, (s) => s.listJobs(runId).filter((job) => job.state === 'running'));
      if (running.length === 0) return;
      if (i === 100) for (const job of running) await call(client, 'cancel_job', { job_id: `job-${job.seq}` });
      await sleep(100);
    }
    throw new Error('jobs started by fuzzed calls did not end');
  }

  beforeAll(async () => {
    ({ client, runId, workspace } = await stdioRun(home, backend, {
      budget: 'episodes=8,submissions=3',
    }));
    await waitBaseline(client);
    mkdirSync(join(home, 'submissions'), { recursive: true });
    await call(client, 'exec', { command: 'mkdir -p output && ln -s /etc output/link && echo hello > code/hello.txt' });
    await settle();
  });

  afterAll(async () => {
    await client?.close();
  });

  it('refuses a NUL byte in a command at validation: no job row, no cgroup, nothing started', async () => {
    for (const tool of ['exec', 'run_training']) {
      const before = state();
      const result = await call(client, tool, { command: 'echo a\0b' });
      expect(result.isError, tool).toBe(true);
      expect(result.text).toMatch(/NUL byte.*remove it/);
      expect(state()).toBe(before);
    }
  });

  it.each(tools.map((tool) => tool.name))(
    '%s: any arguments give a result or an error with a message, in time; a refused call changes nothing',
    async (toolName) => {
      const { tools: listed } = await client.listTools();
      const schema = listed.find((t) => t.name === toolName)!.inputSchema as { properties?: Record<string, JsonSchemaProperty> };
      let cases = 0;
      let refused = 0;
      await fc.assert(
        fc.asyncProperty(argumentsArbitrary(schema), async (args) => {
          cases++;
          const before = state();
          const started = Date.now();
          const result: CallResult = await call(client, toolName, args);
          const elapsed = Date.now() - started;
          // No answer, refusal or not, tells the agent where the server keeps the store, other runs or the package.
          expect(result.text).not.toContain(home);
          expect(result.text).not.toContain(packageRoot);
          expect(elapsed, JSON.stringify(args).slice(0, 200)).toBeLessThan(hangMs + requestedWaitMs(toolName, args));
          if (result.isError) {
            refused++;
            expect(result.text, JSON.stringify(args).slice(0, 200)).toMatch(/\S{3}/);
            expect(result.text).not.toMatch(/\[INTERNAL\]/);
            expect(state(), JSON.stringify(args).slice(0, 200)).toBe(before);
          } else {
            expect(typeof result.structured).toBe('object');
            await settle();
          }
        }),
        { numRuns: runsPerTool, endOnFailure: true },
      );
      recordFigure({ kind: 'fuzz', tool: toolName, backend, cases, refused });
      // The server is still there and answers.
      expect((await call(client, 'budget_status')).structured.run_id).toBe(runId);
    },
    600_000,
  );
});
