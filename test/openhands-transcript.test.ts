import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openHandsStatsLines, openHandsTranscript } from '../src/transcripts/readers/openhands.js';
import { bareToolName, readTranscript } from '../src/transcripts/transcript.js';
import { tempDir } from './helpers/sandbox.js';

/**
 * OpenHands' transcript reader on a fixture shaped as OpenHands CLI 1.x writes it (test/fixtures/openhands/, the
 * OpenHands SDK's event models dumped as its `--headless --json` prints them, text lines between, and a conversation's
 * `base_state.json` with two LLMs' `usage_to_metrics`). The launcher's end to end run of it is in test/agent-launch.test.ts.
 */

const fixtures = join(import.meta.dirname, 'fixtures', 'openhands');
const stdout = readFileSync(join(fixtures, 'stdout.jsonl'), 'utf8');

/** A HOME where OpenHands saved the fixture's conversation, and the lines the launcher appends from it. */
function statsLines(): string {
  const home = tempDir('openhands-home');
  const saved = join(home, '.openhands', 'conversations', '0c1f9e4a7b2d4e8f9a6b5c4d3e2f1a0b');
  mkdirSync(saved, { recursive: true });
  cpSync(join(fixtures, 'base_state.json'), join(saved, 'base_state.json'));
  // A conversation folder without its state (a run killed before OpenHands saved it) adds nothing.
  mkdirSync(join(home, '.openhands', 'conversations', 'ffff'), { recursive: true });
  return openHandsStatsLines(home);
}

describe('the OpenHands transcript', () => {
  it('reads every step in order: the prompt, messages, tool calls with their parsed arguments, paired results, the failed ones errors', () => {
    const transcript = readTranscript('openhands', stdout);
    const calls = transcript.steps.filter((step) => step.kind === 'tool_call');
    expect(calls.map((call) => bareToolName(call.tool!))).toEqual(['read_instructions', 'list_files', 'exec', 'budget_status']);
    expect(calls[1]!.arguments).toEqual({ path: '.', depth: 1 });
    const results = transcript.steps.filter((step) => step.kind === 'tool_result');
    expect(results.map((result) => [result.callId, result.isError ?? false])).toEqual([
      ['call_1', false],
      ['call_2', false],
      ['call_3', true],
      ['call_4', true],
    ]);
    expect(results[0]!.text).toContain('# micro-gsm8k');
    expect(results[3]!.text).toMatch(/^Error validating args/);
    expect(transcript.steps[0]).toMatchObject({ kind: 'message', source: 'user', at: '2026-11-30T10:00:00.000000' });
    expect(transcript.steps[1]).toMatchObject({ kind: 'reasoning', text: 'The task comes first.' });
    expect(transcript.steps.at(-1)).toMatchObject({ kind: 'message', text: 'Done: nothing submitted.' });
    // Five model responses: four that called a tool, the last that answered.
    expect(transcript).toMatchObject({ turns: 5, toolCalls: 4 });
  });

  it('has "unknown" usage from its stdout alone, and the saved conversation stats summed over its LLMs once the launcher appended them', () => {
    expect(readTranscript('openhands', stdout).usage).toBe('unknown');
    const lines = statsLines();
    expect(lines.trim().split('\n')).toHaveLength(1);
    const transcript = readTranscript('openhands', stdout + lines);
    expect(transcript.model).toBe('openai/gpt-5.5');
    expect(transcript.usage).toMatchObject({
      inputTokens: 52000 + 6000,
      outputTokens: 1800 + 300,
      cachedInputTokens: 40960,
      cacheWriteInputTokens: 0,
      reasoningTokens: 640,
      costSource: 'agent',
    });
    expect((transcript.usage as { costUsd: number }).costUsd).toBeCloseTo(0.0421 + 0.0032, 9);
  });

  it('leaves the dollars to the price table where LiteLLM priced nothing (a cost of 0), and a HOME with no conversation adds no line', () => {
    const unpriced = statsLines().replace(/"accumulated_cost":[\d.]+/g, '"accumulated_cost":0');
    const usage = readTranscript('openhands', stdout + unpriced).usage;
    expect(usage).toMatchObject({ inputTokens: 58000 });
    expect(usage).not.toHaveProperty('costUsd');
    expect(openHandsStatsLines(tempDir('openhands-empty'))).toBe('');
  });

  it("reads only real folders and regular files of the agent's HOME: a link, a FIFO or an oversized state adds nothing, and blocks nothing", () => {
    const home = tempDir('openhands-hostile');
    const conversations = join(home, '.openhands', 'conversations');
    const folder = (id: string) => {
      mkdirSync(join(conversations, id), { recursive: true });
      return join(conversations, id, 'base_state.json');
    };
    // A state of the launcher's own user elsewhere, which a link would have it read.
    const secret = join(tempDir('openhands-outside'), 'base_state.json');
    cpSync(join(fixtures, 'base_state.json'), secret);
    symlinkSync(secret, folder('a-link'));
    symlinkSync(join(secret, '..'), join(conversations, 'b-folder-link'));
    // Opened for reading, a FIFO with no writer would block the launcher for ever.
    execFileSync('mkfifo', [folder('c-fifo')]);
    writeFileSync(folder('d-huge'), `{"stats":{"usage_to_metrics":{}},"pad":"${'x'.repeat(4 * 1024 * 1024)}"}`);
    cpSync(join(fixtures, 'base_state.json'), folder('e-real'));
    const lines = openHandsStatsLines(home).trim().split('\n');
    expect(lines.map((line) => JSON.parse(line).conversation_id)).toEqual(['e-real']);
    // A HOME whose .openhands is itself a link is not read at all.
    const linked = tempDir('openhands-linked-home');
    symlinkSync(join(home, '.openhands'), join(linked, '.openhands'));
    expect(openHandsStatsLines(linked)).toBe('');
  });

  it('keeps the usage of a run killed mid-event: a cut pretty-printed block is dropped at the trailer on the next line', () => {
    const events = stdout.split('\n').filter((line) => line.startsWith('{'));
    const pretty = events.map((line) => `--JSON Event--\n${JSON.stringify(JSON.parse(line), null, 2)}`);
    // The last event cut by the kill, mid-line; the launcher then writes a newline and the trailer.
    const cut = pretty.at(-1)!.slice(0, Math.floor(pretty.at(-1)!.length / 2));
    const killed = `${[...pretty.slice(0, -1), cut].join('\n')}\n${statsLines()}`;
    const transcript = readTranscript('openhands', killed);
    expect(transcript.usage).toMatchObject({ inputTokens: 58000, outputTokens: 2100 });
    expect(transcript.steps).toEqual(readTranscript('openhands', events.slice(0, -1).join('\n')).steps);
  });

  it('reads the older CLI output too: each event pretty-printed over many lines after a --JSON Event-- line', () => {
    const pretty = stdout
      .split('\n')
      .map((line) => (line.startsWith('{') ? `--JSON Event--\n${JSON.stringify(JSON.parse(line), null, 2)}` : line))
      .join('\n');
    expect(readTranscript('openhands', pretty).steps).toEqual(readTranscript('openhands', stdout).steps);
  });

  it("tells the launcher whether its model answered, and a dead model API's error", () => {
    expect(openHandsTranscript.modelActivity!(stdout, '')).toEqual({ answered: true, lastError: undefined });
    const error = {
      id: 'x',
      timestamp: '2026-11-30T10:00:00',
      source: 'environment',
      code: 'AuthenticationError',
      detail: 'litellm.AuthenticationError: OpenAIException - 401 invalid x-api-key',
      kind: 'ConversationErrorEvent',
    };
    // The prompt, then the run loop's failure: no event of the agent's LLM.
    const dead = `Agent is working\n${stdout.split('\n')[1]}\n${JSON.stringify(error)}\nAgent finished\n`;
    expect(openHandsTranscript.modelActivity!(dead, '')).toEqual({
      answered: false,
      lastError: 'AuthenticationError: litellm.AuthenticationError: OpenAIException - 401 invalid x-api-key',
    });
  });
});
