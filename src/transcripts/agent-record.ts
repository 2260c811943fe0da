import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Store } from '../store/store.js';
import { toAtif } from './atif.js';
import { runTranscript, type RunUsage } from './run-usage.js';

/**
 * The agent's side of a run in its export folder: `transcript.jsonl`, the CLI's transcript as it wrote it, and
 * `trajectory.json`, the same as an ATIF trajectory. Neither is written for a run without a transcript (an operator's
 * own client); the names of what was written are returned.
 */
export function writeAgentRecord(store: Store, runId: string, outDir: string, usage: RunUsage): string[] {
  const transcript = runTranscript(store, runId);
  if (!transcript) return [];
  copyFileSync(transcript.path, join(outDir, 'transcript.jsonl'));
  const run = store.getRun(runId);
  const promptFile = run ? join(run.dir, 'agent', 'prompt.md') : undefined;
  const prompt = promptFile && existsSync(promptFile) ? readFileSync(promptFile, 'utf8') : undefined;
  const trajectory = toAtif(transcript, {
    runId,
    agentVersion: run?.agent_version ?? null,
    ...(prompt !== undefined ? { prompt } : {}),
    usage,
  });
  if (!trajectory) return ['transcript.jsonl'];
  writeFileSync(join(outDir, 'trajectory.json'), `${JSON.stringify(trajectory, null, 2)}\n`);
  return ['transcript.jsonl', 'trajectory.json'];
}
