// Sums the figures the red-team suite appends (one JSON line each) to $A2RL_REDTEAM_FIGURES:
//   A2RL_REDTEAM_FIGURES=/tmp/figures.jsonl npx vitest run test/redteam && node scripts/redteam-figures.mjs /tmp/figures.jsonl
import { readFileSync } from 'node:fs';

const file = process.argv[2] ?? process.env.A2RL_REDTEAM_FIGURES;
if (!file) {
  console.error('Give the figures file: node scripts/redteam-figures.mjs FILE (the A2RL_REDTEAM_FIGURES the suite ran with).');
  process.exit(2);
}
const figures = readFileSync(file, 'utf8')
  .split('\n')
  .filter(Boolean)
  .map((line) => JSON.parse(line));
const of = (kind) => figures.filter((f) => f.kind === kind);

const attacks = {};
for (const f of of('attack')) {
  const line = (attacks[`${f.backend} ${f.class}`] ??= { tried: 0, blocked: 0 });
  line.tried++;
  if (f.blocked) line.blocked++;
}
const crashes = of('crash').map((f) => ({ backend: f.backend, point: f.point, answered_calls: f.answered_calls, events_lost: f.events_lost }));
const fuzz = {};
for (const f of of('fuzz')) fuzz[`${f.backend} ${f.tool}`] = (fuzz[`${f.backend} ${f.tool}`] ?? 0) + f.cases;
const latencies = of('stop_latency')
  .map((f) => f.seconds)
  .sort((a, b) => a - b);
const p99 = latencies.length ? latencies[Math.min(latencies.length - 1, Math.ceil(0.99 * latencies.length) - 1)] : null;

console.log(
  JSON.stringify(
    {
      attacks_by_class: attacks,
      crash_points: crashes,
      events_lost_total: crashes.reduce((sum, c) => sum + c.events_lost, 0),
      fuzz_cases_per_tool: fuzz,
      stop_latency_seconds: { count: latencies.length, p99, max: latencies.at(-1) ?? null, cases: of('stop_latency') },
      disk_overshoot_mib: of('disk_overshoot_mib').map((f) => f.value),
    },
    null,
    2,
  ),
);
