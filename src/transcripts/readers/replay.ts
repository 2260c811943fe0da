import { jsonLines } from '../json-lines.js';
import type { TranscriptReader, TranscriptStep } from '../types.js';

/**
 * The replay agent's output (`a2rl replay`): one line per replayed step, `{line, tool, ok, calls, duration_ms}`. It
 * has the calls and whether they failed, not their arguments or results (those are in the run's tool events); no
 * model, so no turns and no usage.
 */
export const replayTranscript: TranscriptReader = {
  read(text) {
    const steps: TranscriptStep[] = [];
    for (const event of jsonLines(text)) {
      if (typeof event.tool !== 'string') continue;
      const callId = `line-${event.line}`;
      steps.push({ kind: 'tool_call', tool: event.tool, callId });
      steps.push({ kind: 'tool_result', tool: event.tool, callId, ...(event.ok === false ? { isError: true } : {}) });
    }
    return { steps, usage: 'unknown', turns: 0 };
  },
};
