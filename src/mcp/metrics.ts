/** Upper bounds (seconds) of the tool-call duration histogram's buckets. */
const durationBuckets = [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60];

interface ToolCallStats {
  count: number;
  sum: number;
  /** Observations at or below each bucket's bound. */
  buckets: number[];
}

export interface Gauges {
  runsActive: () => number;
  jobsRunning: () => number;
  sessionsOpen: () => number;
}

/** The server's Prometheus metrics, in the text exposition format (small enough to write by hand). */
export class Metrics {
  private readonly calls = new Map<string, { tool: string; outcome: string; count: number }>();
  private readonly durations = new Map<string, ToolCallStats>();

  constructor(private readonly gauges: Gauges) {}

  observeToolCall(tool: string, outcome: 'ok' | 'error', seconds: number): void {
    const key = `${tool}\u0000${outcome}`;
    const calls = this.calls.get(key) ?? { tool, outcome, count: 0 };
    calls.count++;
    this.calls.set(key, calls);
    const stats = this.durations.get(tool) ?? { count: 0, sum: 0, buckets: durationBuckets.map(() => 0) };
    stats.count++;
    stats.sum += seconds;
    durationBuckets.forEach((bound, i) => {
      if (seconds <= bound) stats.buckets[i]!++;
    });
    this.durations.set(tool, stats);
  }

  render(): string {
    const lines = [
      '# HELP a2rl_runs_active Runs this server serves that are still active.',
      '# TYPE a2rl_runs_active gauge',
      `a2rl_runs_active ${this.gauges.runsActive()}`,
      '# HELP a2rl_jobs_running Sandbox jobs (agent jobs and grading) running now.',
      '# TYPE a2rl_jobs_running gauge',
      `a2rl_jobs_running ${this.gauges.jobsRunning()}`,
      '# HELP a2rl_sessions_open MCP sessions open now, both transports.',
      '# TYPE a2rl_sessions_open gauge',
      `a2rl_sessions_open ${this.gauges.sessionsOpen()}`,
      '# HELP a2rl_tool_calls_total Tool calls answered, by tool and outcome.',
      '# TYPE a2rl_tool_calls_total counter',
      ...[...this.calls.values()].map((c) => `a2rl_tool_calls_total{tool="${c.tool}",outcome="${c.outcome}"} ${c.count}`),
      '# HELP a2rl_tool_call_seconds How long tool calls took.',
      '# TYPE a2rl_tool_call_seconds histogram',
    ];
    for (const [tool, stats] of this.durations) {
      durationBuckets.forEach((bound, i) => lines.push(`a2rl_tool_call_seconds_bucket{tool="${tool}",le="${bound}"} ${stats.buckets[i]}`));
      lines.push(`a2rl_tool_call_seconds_bucket{tool="${tool}",le="+Inf"} ${stats.count}`);
      lines.push(`a2rl_tool_call_seconds_sum{tool="${tool}"} ${stats.sum}`);
      lines.push(`a2rl_tool_call_seconds_count{tool="${tool}"} ${stats.count}`);
    }
    return `${lines.join('\n')}\n`;
  }
}
