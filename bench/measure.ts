import type { Client } from '@modelcontextprotocol/sdk/client/index.js';

/** The p-th percentile of ascending times (nearest rank). */
export const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
export const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;

/** Latencies' count, p50 and p99 in ms; three decimals, as a stdio round trip is tens of microseconds. */
export function latencies(times: number[]) {
  const sorted = [...times].sort((a, b) => a - b);
  return { calls: times.length, p50_ms: round(percentile(sorted, 50), 3), p99_ms: round(percentile(sorted, 99), 3) };
}

/**
 * Waits until the run's baseline grading (started with the run) is done, so that it does not share the CPUs with a
 * measurement; a failed baseline ends the bench with its reason rather than a wait that never ends.
 */
export async function baselineGraded(client: Client): Promise<void> {
  for (;;) {
    const score = await client.callTool({ name: 'get_score', arguments: {} });
    const baseline = (score.structuredContent as { baseline?: { state?: string; error?: string } }).baseline;
    if (baseline?.state === 'graded') return;
    if (baseline?.state === 'failed') throw new Error(`the run's baseline grading failed: ${baseline.error}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}
