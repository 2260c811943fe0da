import type { TranscriptReader } from '../types.js';
import { claudeCodeTranscript } from './claude-code.js';
import { codexTranscript } from './codex.js';
import { geminiCliTranscript } from './gemini-cli.js';
import { openCodeTranscript } from './opencode.js';
import { openHandsTranscript } from './openhands.js';
import { qwenCodeTranscript } from './qwen-code.js';
import { replayTranscript } from './replay.js';

/**
 * The transcript reader of each agent, by the name a run records (`runs.agent`). A `command:` agent's output has no
 * known format: it has no reader, and its transcript reads as no steps and "unknown" usage.
 */
export const transcriptReaders: Readonly<Record<string, TranscriptReader>> = {
  'claude-code': claudeCodeTranscript,
  codex: codexTranscript,
  'gemini-cli': geminiCliTranscript,
  opencode: openCodeTranscript,
  openhands: openHandsTranscript,
  'qwen-code': qwenCodeTranscript,
  replay: replayTranscript,
};
