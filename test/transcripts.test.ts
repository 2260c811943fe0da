import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { buildLeaderboard, leaderboardCsv, runResults } from '../src/reports/leaderboard.js';
import { exportRun } from '../src/reports/export.js';
import { Store } from '../src/store/store.js';
import { getTask } from '../src/tasks/task.js';
import { type AtifTrajectory, atifVersion, toAtif } from '../src/transcripts/atif.js';
import { fileLines, jsonLines } from '../src/transcripts/json-lines.js';
import { findPrice, loadPriceTable, type PriceTable, pricedUsage, priceTables, shippedPrices } from '../src/transcripts/prices.js';
import { claudeCodeTranscript } from '../src/transcripts/readers/claude-code.js';
import { codexTranscript } from '../src/transcripts/readers/codex.js';
import { geminiCliTranscript } from '../src/transcripts/readers/gemini-cli.js';
import { runUsage } from '../src/transcripts/run-usage.js';
import { bareToolName, countTurns, readTranscript, type Transcript } from '../src/transcripts/transcript.js';
import type { ReportedUsage } from './helpers/model-apis.js';
import { recordCheckVerdict } from './helpers/integrity.js';
import { tempDir } from './helpers/sandbox.js';

/**
 * The transcript readers on transcripts the real CLIs wrote (test/fixtures/transcripts/record.ts: each CLI at its
 * pinned version, launched by `a2rl run` against the scripted model API, which reports usage as the real APIs do),
 * their totals checked against what that API reported; the price table; the run's usage in the leaderboard and the
 * export; the ATIF trajectory against the ATIF v1.7 schema.
 */

const fixtures = join(import.meta.dirname, 'fixtures', 'transcripts');
const agents = ['claude-code', 'codex', 'gemini-cli'] as const;
type Agent = (typeof agents)[number];
const transcriptOf = (agent: Agent) => readFileSync(join(fixtures, `${agent}.jsonl`), 'utf8');
const apiOf = (agent: Agent) =>
  JSON.parse(readFileSync(join(fixtures, `${agent}.api.json`), 'utf8')) as {
    agent_version: string;
    driver_model: string;
    requests: Array<{ usage: ReportedUsage }>;
  };
/** What the scripted API reported over the run, summed. */
const reported = (agent: Agent) =>
  apiOf(agent).requests.reduce(
    (sum, { usage }) => ({
      input: sum.input + usage.input,
      cachedInput: sum.cachedInput + usage.cachedInput,
      cacheWrite: sum.cacheWrite + usage.cacheWrite,
      output: sum.output + usage.output,
      reasoning: sum.reasoning + usage.reasoning,
    }),
    { input: 0, cachedInput: 0, cacheWrite: 0, output: 0, reasoning: 0 },
  );

describe('each CLI transcript, as the real CLI wrote it', () => {
  for (const agent of agents) {
    it(`${agent}: every step in order, the tool calls paired with their results, the refused one an error`, () => {
      const transcript = readTranscript(agent, transcriptOf(agent));
      expect(transcript.agent).toBe(agent);
      const calls = transcript.steps.filter((step) => step.kind === 'tool_call');
      expect(calls.map((call) => bareToolName(call.tool!))).toEqual(['read_instructions', 'list_files', 'read_file', 'exec']);
      expect(calls[1]!.arguments).toEqual({ path: '.', depth: 1 });
      expect(calls[3]!.arguments).toEqual({ command: 'echo scripted' });
      expect(transcript.toolCalls).toBe(4);
      const results = transcript.steps.filter((step) => step.kind === 'tool_result');
      expect(results.map((result) => result.callId).sort()).toEqual(calls.map((call) => call.callId).sort());
      const byCall = new Map(results.map((result) => [result.callId, result]));
      expect(calls.map((call) => Boolean(byCall.get(call.callId)!.isError))).toEqual([false, false, true, false]);
      expect(byCall.get(calls[3]!.callId)!.text).toContain('scripted');
      expect(byCall.get(calls[0]!.callId)!.text).toContain('Micro GSM8K');
      // The model's last answer, its fourth response (the two calls of the second came in one).
      const said = transcript.steps.filter((step) => step.kind === 'message' && !step.isError && step.source !== 'user');
      expect(said.at(-1)!.text).toBe('Done: read the brief and looked around.');
      expect(transcript.turns).toBe(apiOf(agent).requests.length);
      expect(transcript.turns).toBe(4);
    });
  }

  it("claude-code: the run's tokens are what the API reported, and its dollars Claude Code's own list-price figure", () => {
    const transcript = readTranscript('claude-code', transcriptOf('claude-code'));
    const api = reported('claude-code');
    expect(transcript.model).toBe('claude-sonnet-4-5');
    expect(transcript.usage).toEqual({
      inputTokens: api.input,
      cachedInputTokens: api.cachedInput,
      cacheWriteInputTokens: api.cacheWrite,
      outputTokens: api.output,
      reasoningTokens: 0,
      costUsd: expect.any(Number),
      costSource: 'agent',
    });
    // The shipped table prices the same tokens as Claude Code 2.1.332 does.
    const usage = transcript.usage as Exclude<Transcript['usage'], 'unknown'>;
    const { costUsd: _own, costSource: _source, ...tokens } = usage;
    expect(pricedUsage(tokens, 'claude-sonnet-4-5', [shippedPrices]).costUsd).toBeCloseTo(usage.costUsd!, 10);
    // Each response's prompt side, as the API reported it when the response started.
    const perResponse = transcript.steps.filter((step) => step.usage).map((step) => step.usage!.inputTokens);
    expect(perResponse).toEqual(apiOf('claude-code').requests.map((request) => request.usage.input));
    expect(transcript.steps.every((step) => step.at && !Number.isNaN(Date.parse(step.at)))).toBe(true);
  });

  it('codex: the tokens of its turn are what the API reported, reasoning included; no dollars of its own', () => {
    const transcript = readTranscript('codex', transcriptOf('codex'));
    const api = reported('codex');
    expect(transcript.usage).toEqual({
      inputTokens: api.input,
      cachedInputTokens: api.cachedInput,
      outputTokens: api.output,
      reasoningTokens: api.reasoning,
    });
    // Its warning about an unknown model is kept, as an error message.
    expect(transcript.steps[0]).toMatchObject({ kind: 'message', isError: true, text: expect.stringContaining('scripted-model') });
  });

  it("gemini-cli: the session's tokens are what the API reported, thoughts counted as output; the prompt is the first step", () => {
    const transcript = readTranscript('gemini-cli', transcriptOf('gemini-cli'));
    const api = reported('gemini-cli');
    expect(transcript.usage).toEqual({
      inputTokens: api.input,
      cachedInputTokens: api.cachedInput,
      outputTokens: api.output,
      reasoningTokens: api.reasoning,
    });
    expect(transcript.model).toBe('scripted-model');
    expect(transcript.steps[0]).toMatchObject({ kind: 'message', source: 'user', text: expect.stringContaining('micro-gsm8k') });
  });

  it('still tells the launcher that each model answered', () => {
    for (const [agent, reader] of [
      ['claude-code', claudeCodeTranscript],
      ['codex', codexTranscript],
      ['gemini-cli', geminiCliTranscript],
    ] as const) {
      expect(reader.modelActivity!(transcriptOf(agent), '').answered, agent).toBe(true);
    }
  });
});

describe('a transcript file, read a line at a time', () => {
  it('gives its lines across chunk boundaries and multi-byte characters, skipping only an over-long line', () => {
    const dir = tempDir('transcript-lines');
    const file = join(dir, 'transcript.jsonl');
    const lines = ['é'.repeat(700_000), '{"type":"a"}', '', `${'x'.repeat(3 * 2 ** 20)}ü`, 'last'];
    writeFileSync(file, lines.join('\n'));
    expect([...fileLines(file)]).toEqual(lines);
    writeFileSync(file, `${lines.join('\n')}\n`);
    expect([...fileLines(file)]).toEqual(lines);
    // One line of 17 Mi characters (a tool result an agent made huge) is passed over; the lines around it are read.
    writeFileSync(file, `{"type":"a"}\n${'y'.repeat(17 * 2 ** 20)}\n{"type":"b"}`);
    expect([...jsonLines(fileLines(file))]).toEqual([{ type: 'a' }, { type: 'b' }]);
  });
});

describe('a transcript without usage says "unknown", never 0', () => {
  it('a run stopped before its closing event, an agent whose output has no known format, an empty transcript', () => {
    for (const agent of agents) {
      const lines = transcriptOf(agent).trimEnd().split('\n');
      const cut = lines.filter((line) => !/"type":"(result|turn\.completed)"/.test(line));
      expect(cut.length, agent).toBe(lines.length - 1);
      const transcript = readTranscript(agent, cut.join('\n'));
      expect(transcript.usage, agent).toBe('unknown');
      expect(transcript.toolCalls, agent).toBe(4);
      expect(readTranscript(agent, '').usage).toBe('unknown');
    }
    expect(readTranscript('command', 'hello\n{"type":"result","total_cost_usd":1}\n')).toEqual({
      agent: 'command',
      steps: [],
      usage: 'unknown',
      turns: 0,
      toolCalls: 0,
    });
  });

  it('a cost Claude Code guessed for a model it cannot price is left to the price table, and without an entry is unknown', () => {
    const guessed = transcriptOf('claude-code').replace('"costBasis":"list"', '"costBasis":"unknown"');
    expect(guessed).not.toBe(transcriptOf('claude-code'));
    const usage = readTranscript('claude-code', guessed).usage as Exclude<Transcript['usage'], 'unknown'>;
    expect(usage.inputTokens).toBe(reported('claude-code').input);
    expect(usage.costUsd).toBeUndefined();
    expect(pricedUsage(usage, 'a-model-nobody-priced', priceTables()).costUsd).toBeUndefined();
    expect(pricedUsage(usage, 'claude-sonnet-4-5', priceTables())).toMatchObject({ costSource: 'price-table' });
  });

  it('a replay gives its calls and whether they failed, no turns and no usage', () => {
    const replay = readTranscript(
      'replay',
      '{"line":1,"tool":"read_instructions","ok":true,"calls":1,"duration_ms":5}\n{"line":2,"tool":"exec","ok":false,"calls":1,"duration_ms":9}\n',
    );
    expect(replay).toMatchObject({ usage: 'unknown', turns: 0, toolCalls: 2 });
    expect(replay.steps.filter((step) => step.kind === 'tool_result').map((step) => Boolean(step.isError))).toEqual([false, true]);
  });

  it('counts a response per run of model steps between tool results', () => {
    expect(
      countTurns([
        { kind: 'message', source: 'user' },
        { kind: 'reasoning' },
        { kind: 'tool_call' },
        { kind: 'tool_call' },
        { kind: 'tool_result' },
        { kind: 'tool_result' },
        { kind: 'message', isError: true, text: 'HTTP 503, retry 1' },
        { kind: 'message' },
      ]),
    ).toBe(2);
  });
});

describe('the price table', () => {
  it('prices tokens per million, cached and cache-written tokens at their own rates, a dated model name as its model', () => {
    const table: PriceTable = { date: '2026-01-02', source: 'test', models: { m: { input: 2, output: 8, cached_input: 0.5 } } };
    const priced = pricedUsage({ inputTokens: 1_000_000, cachedInputTokens: 400_000, outputTokens: 100_000 }, 'm-20260101', [table]);
    expect(priced.costUsd).toBeCloseTo(0.6 * 2 + 0.4 * 0.5 + 0.1 * 8, 10);
    expect(priced).toMatchObject({ costSource: 'price-table', priceTable: '2026-01-02 (test)' });
    // The operator's table before the shipped one; the shipped one for what it leaves out.
    const operator: PriceTable = { date: '2026-01-02', source: 'mine', models: { 'gpt-5': { input: 1, output: 1 } } };
    expect(findPrice(priceTables(operator), 'gpt-5')!.table.source).toBe('mine');
    expect(findPrice(priceTables(operator), 'gemini-2.5-pro')!.table).toBe(shippedPrices);
    expect(findPrice(priceTables(operator), 'gpt-5-mini')!.price).toEqual(shippedPrices.models['gpt-5-mini']);
  });

  it('reads an operator table from a file, and refuses a bad one saying what a table is', () => {
    const dir = tempDir('prices');
    const good = join(dir, 'prices.json');
    writeFileSync(good, JSON.stringify({ date: '2026-03-01', models: { 'scripted-model': { input: 1, output: 2, cached_input: 0.1 } } }));
    expect(loadPriceTable(good)).toEqual({
      date: '2026-03-01',
      source: good,
      models: { 'scripted-model': { input: 1, output: 2, cached_input: 0.1 } },
    });
    for (const [content, message] of [
      ['{', /not a readable JSON file/],
      [JSON.stringify({ models: {} }), /date/],
      [JSON.stringify({ date: '2026-03-01', models: { x: { input: -1, output: 1 } } }), /not a price table/],
      [JSON.stringify({ date: '2026-03-01', models: { x: { input: 1, output: 1, per: 'token' } } }), /not a price table/],
    ] as const) {
      const bad = join(dir, 'bad.json');
      writeFileSync(bad, content);
      expect(() => loadPriceTable(bad)).toThrow(message);
    }
    expect(() => loadPriceTable(join(dir, 'missing.json'))).toThrow(/docs\/operating.md/);
  });
});

const task = getTask('micro-gsm8k');

/** A finished launched run in a real store: its agent's transcript, a graded submission scoring `final`. */
function seedRun(store: Store, home: string, id: string, agent: string, model: string, transcript: string, final: number): void {
  const dir = join(home, 'runs', id);
  mkdirSync(join(dir, 'agent'), { recursive: true });
  writeFileSync(join(dir, 'agent', 'transcript.jsonl'), transcript);
  writeFileSync(join(dir, 'agent', 'prompt.md'), 'Work on the a2rl task micro-gsm8k.');
  const createdAt = Date.now() - 60_000;
  store.insertRun({
    id,
    task_id: task.id,
    label: null,
    budget: JSON.stringify({ wallSeconds: 600, computeSeconds: 600, submissions: 2, rolloutEpisodes: 100 }),
    dir,
    sandbox: 'bwrap',
    grader_version: task.graderVersion,
    owner: '0-0',
    created_at: createdAt,
  });
  store.setRunAgent(id, { agent, agent_version: '1.0', driver_model: model });
  recordCheckVerdict(store, id);
  const event = (kind: string, name: string, data: unknown) =>
    store.insertEvent({ run_id: id, at: createdAt + 1000, t_rel_ms: 1000, kind, name, data: JSON.stringify(data) });
  event('agent', 'launched', {
    agent,
    agent_version: '1.0',
    driver_model: model,
    batch: 'b',
    repeat: 1,
    transcript: join(dir, 'agent', 'transcript.jsonl'),
  });
  event('tool', 'read_instructions', { arguments: {}, result: {}, duration_ms: 1 });
  const inserted = store.insertSubmissionWithin(2, {
    run_id: id,
    path: 'output/final',
    note: null,
    content_hash: `${id}-hash`,
    files: 1,
    bytes: 1,
    created_at: createdAt + 2000,
  });
  if (!('inserted' in inserted)) throw new Error('seeding failed');
  store.insertGrade({
    task_id: task.id,
    grader_version: task.graderVersion,
    content_hash: `${id}-hash`,
    public_score: final,
    private_score: final,
    details: '{}',
    duration_ms: 1,
    created_at: createdAt,
  });
  store.setSubmissionState(inserted.inserted.id, 'graded', null, createdAt + 3000);
  store.endRun(id, 'the agent disconnected', createdAt + 4000);
}

function seededStore() {
  const home = tempDir('transcripts-store');
  const store = new Store(join(home, 'store.sqlite'));
  store.insertGrade({
    task_id: task.id,
    grader_version: task.graderVersion,
    content_hash: task.baseModelHash,
    public_score: 10,
    private_score: 10,
    details: '{}',
    duration_ms: 1,
    created_at: 0,
  });
  return { home, store };
}

describe('usage in the leaderboard and the export', () => {
  it('leaderboard: mean tokens, mean dollars and score gain per dollar per group, "unknown" where no transcript says', () => {
    const { home, store } = seededStore();
    const claude = transcriptOf('claude-code');
    const cut = claude
      .trimEnd()
      .split('\n')
      .filter((line) => !line.includes('"type":"result"'))
      .join('\n');
    // Two Claude Code runs of one group, one stopped before its totals; a Codex run, priced from the operator's table.
    seedRun(store, home, 'claude-1', 'claude-code', 'claude-sonnet-4-5', claude, 30);
    seedRun(store, home, 'claude-2', 'claude-code', 'claude-sonnet-4-5', cut, 20);
    seedRun(store, home, 'codex-1', 'codex', 'scripted-model', transcriptOf('codex'), 40);
    const prices: PriceTable = {
      date: '2026-03-01',
      source: 'test',
      models: { 'scripted-model': { input: 1, output: 10, cached_input: 0.1 } },
    };
    const withPrices = buildLeaderboard(runResults(store, task.id, prices));
    const withoutPrices = buildLeaderboard(runResults(store, task.id));
    store.close();

    const claudeCost = (readTranscript('claude-code', claude).usage as { costUsd: number }).costUsd;
    const claudeTokens = reported('claude-code').input + reported('claude-code').output;
    const claudeRow = withPrices.find((row) => row.agent === 'claude-code')!;
    expect(claudeRow).toMatchObject({ runs: 2, tokens_runs: 1, cost_runs: 1, mean_tokens: claudeTokens });
    expect(claudeRow.mean_cost_usd).toBeCloseTo(claudeCost, 4);
    // Gain over the costed run only: 30 - 10 over its dollars.
    expect(claudeRow.gain_per_dollar).toBeCloseTo(20 / claudeCost, 0);

    const codex = reported('codex');
    const codexDollars = ((codex.input - codex.cachedInput) * 1 + codex.cachedInput * 0.1 + codex.output * 10) / 1e6;
    const codexRow = withPrices.find((row) => row.agent === 'codex')!;
    expect(codexRow).toMatchObject({ runs: 1, cost_runs: 1, mean_tokens: codex.input + codex.output });
    expect(codexRow.mean_cost_usd).toBeCloseTo(codexDollars, 4);
    expect(codexRow.gain_per_dollar).toBeCloseTo(30 / codexDollars, 1);
    // Without a price for its model: tokens known, dollars unknown, never 0.
    expect(withoutPrices.find((row) => row.agent === 'codex')).toMatchObject({ mean_cost_usd: null, cost_runs: 0, gain_per_dollar: null });

    const csv = leaderboardCsv(withoutPrices).trim().split('\n');
    const header = csv[0]!.split(',');
    const cellsOf = (agent: string) => {
      const cells = csv.find((line) => line.includes(`,${agent},`))!.split(',');
      return (name: string) => cells[header.indexOf(name)];
    };
    expect(header).toEqual(expect.arrayContaining(['mean agent tokens', 'mean agent dollars', 'score gain per dollar']));
    expect(cellsOf('codex')('mean agent dollars')).toBe('unknown');
    expect(cellsOf('codex')('score gain per dollar')).toBe('unknown');
    expect(cellsOf('codex')('mean agent tokens')).toBe(String(codex.input + codex.output));
    expect(cellsOf('claude-code')('mean agent tokens')).toBe(`${claudeTokens} (1 of 2 runs)`);
  });

  it('runs export: the usage in run.json, the transcript, and an ATIF trajectory the published v1.7 schema accepts', () => {
    const { home, store } = seededStore();
    seedRun(store, home, 'gemini-1', 'gemini-cli', 'scripted-model', transcriptOf('gemini-cli'), 25);
    seedRun(store, home, 'codex-1', 'codex', 'scripted-model', transcriptOf('codex'), 25);
    const out = join(home, 'export');
    exportRun(store, 'gemini-1', out);
    exportRun(store, 'codex-1', join(home, 'export-codex'));
    const usage = runUsage(store, 'gemini-1');
    store.close();
    const gemini = reported('gemini-cli');
    const run = JSON.parse(readFileSync(join(out, 'run.json'), 'utf8')) as { agent_usage: Record<string, unknown> };
    expect(run.agent_usage).toEqual({ ...usage, transcript: join(home, 'runs', 'gemini-1', 'agent', 'transcript.jsonl') });
    expect(run.agent_usage).toMatchObject({
      agent: 'gemini-cli',
      model: 'scripted-model',
      turns: 4,
      tool_calls: 4,
      input_tokens: gemini.input,
      output_tokens: gemini.output,
      cost_usd: 'unknown',
      cost_source: null,
    });
    expect(readFileSync(join(out, 'transcript.jsonl'), 'utf8')).toBe(transcriptOf('gemini-cli'));
    expect(readFileSync(join(out, 'report.html'), 'utf8')).toContain('agent cost</td><td>unknown');
    for (const dir of [out, join(home, 'export-codex')]) {
      const trajectory = JSON.parse(readFileSync(join(dir, 'trajectory.json'), 'utf8')) as AtifTrajectory;
      expectValidAtif(trajectory);
    }
    // The Codex run's prompt comes from the run's prompt.md: its transcript does not repeat it.
    const codexTrajectory = JSON.parse(readFileSync(join(home, 'export-codex', 'trajectory.json'), 'utf8')) as AtifTrajectory;
    expect(codexTrajectory.steps[0]).toEqual({ step_id: 1, source: 'user', message: 'Work on the a2rl task micro-gsm8k.' });
  });
});

const ajv = new Ajv2020.default({ strict: true, allErrors: true });
addFormats.default(ajv);
const validateAtif = ajv.compile(JSON.parse(readFileSync(join(fixtures, 'atif-v1.7.schema.json'), 'utf8')));

/** The ATIF v1.7 schema, and the rules of Harbor's models the schema cannot say (its model validators). */
function expectValidAtif(trajectory: AtifTrajectory): void {
  expect(validateAtif(trajectory), JSON.stringify(validateAtif.errors)).toBe(true);
  expect(trajectory.schema_version).toBe(atifVersion);
  trajectory.steps.forEach((step, index) => {
    expect(step.step_id).toBe(index + 1);
    const ids = new Set(step.tool_calls?.map((call) => call.tool_call_id));
    for (const result of step.observation?.results ?? []) if (result.source_call_id) expect(ids.has(result.source_call_id)).toBe(true);
    if (step.source !== 'agent') {
      for (const field of ['model_name', 'reasoning_effort', 'reasoning_content', 'tool_calls', 'metrics'])
        expect(step, `step ${step.step_id}`).not.toHaveProperty(field);
    }
  });
}

describe('ATIF trajectories', () => {
  const usageOf = (agent: Agent, prices?: PriceTable) => {
    const { home, store } = seededStore();
    seedRun(store, home, 'r', agent, apiOf(agent).driver_model, transcriptOf(agent), 20);
    const usage = runUsage(store, 'r', prices);
    store.close();
    return usage;
  };

  for (const agent of agents) {
    it(`${agent}: one agent step per model response, each call with its result, final metrics; valid ATIF v1.7`, () => {
      const transcript = readTranscript(agent, transcriptOf(agent));
      const usage = usageOf(agent);
      const trajectory = toAtif(transcript, { runId: 'r', agentVersion: apiOf(agent).agent_version, prompt: 'the prompt', usage })!;
      expectValidAtif(trajectory);
      const responses = trajectory.steps.filter((step) => step.source === 'agent');
      expect(responses).toHaveLength(4);
      expect(responses.map((step) => step.tool_calls?.length ?? 0)).toEqual([1, 2, 1, 0]);
      expect(responses[3]!.message).toBe('Done: read the brief and looked around.');
      const refused = responses[1]!.observation!.results.find((result) => result.extra?.is_error)!;
      expect(responses[1]!.tool_calls!.find((call) => call.tool_call_id === refused.source_call_id)!.function_name).toMatch(/read_file$/);
      expect(trajectory.steps[0]).toMatchObject({ source: 'user' });
      expect(trajectory.final_metrics).toMatchObject({
        total_prompt_tokens: reported(agent).input,
        total_completion_tokens: reported(agent).output,
        total_cached_tokens: reported(agent).cachedInput,
        total_steps: trajectory.steps.length,
      });
      expect(trajectory.agent).toEqual({ name: agent, version: apiOf(agent).agent_version, model_name: expect.any(String) });
    });
  }

  it('per-step metrics where the CLI reports usage per response, and the dollars where known', () => {
    const trajectory = toAtif(readTranscript('claude-code', transcriptOf('claude-code')), {
      runId: 'r',
      agentVersion: null,
      usage: usageOf('claude-code'),
    })!;
    const metrics = trajectory.steps.filter((step) => step.source === 'agent').map((step) => step.metrics?.prompt_tokens);
    expect(metrics).toEqual(apiOf('claude-code').requests.map((request) => request.usage.input));
    expect(trajectory.final_metrics!.total_cost_usd).toBeGreaterThan(0);
    expect(trajectory.final_metrics!.extra).toMatchObject({ cost_source: 'agent' });
    expect(trajectory.agent.version).toBe('unknown');
    const codex = toAtif(readTranscript('codex', transcriptOf('codex')), {
      runId: 'r',
      agentVersion: null,
      usage: usageOf('codex'),
    })!;
    expect(codex.final_metrics).not.toHaveProperty('total_cost_usd');
    expectValidAtif(codex);
  });

  it('the schema refuses what ATIF does not allow', () => {
    const trajectory = toAtif(readTranscript('gemini-cli', transcriptOf('gemini-cli')), {
      runId: 'r',
      agentVersion: '1',
      usage: usageOf('gemini-cli'),
    })!;
    expect(validateAtif(trajectory)).toBe(true);
    expect(validateAtif({ ...trajectory, steps: [] })).toBe(false);
    expect(validateAtif({ ...trajectory, agent: { name: 'x' } })).toBe(false);
    expect(validateAtif({ ...trajectory, steps: [{ ...trajectory.steps[0], source: 'tool' }] })).toBe(false);
    expect(validateAtif({ ...trajectory, steps: [{ ...trajectory.steps[0], unknown_field: 1 }] })).toBe(false);
  });
});
