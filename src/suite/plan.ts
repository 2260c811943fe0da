import { type BudgetLimits, formatBudget, parseBudget } from '../tasks/budget.js';
import { formatDuration } from '../util/duration.js';
import { emptyLimits, getTaskFile } from '../tasks/task.js';
import type { RunRow, Store } from '../store/store.js';
import type { Suite, SuiteAgent, SuiteTask } from './schema.js';

/**
 * A suite's plan: one cell per agent × model × task, each to hold `repeats` finished runs. The store is the record of
 * what is done: a cell's runs are those labelled with its label on its task, so a suite run again (after a crash, a
 * kill, Ctrl-C) makes only what is missing.
 */

export interface Cell {
  /** `<agent id>` or `<agent id>/<model>`: the row's name in the suite's tables. */
  id: string;
  agentId: string;
  /** What `a2rl run --agent` takes: a CLI's name, `replay:FILE` or `command:…`. */
  agent: string;
  model?: string;
  task: SuiteTask;
  /** The runs' label in the store: `suite:<suite>/<cell id>`. */
  label: string;
  agentArgs: string[];
  agentEnv: string[];
  agentBinds: string[];
  /** Each run's limits: the task's default with the suite's (or the task's) budget over it. */
  limits: BudgetLimits;
  budget?: string;
}

/** Why a run of a suite does not count: its suite process stopped before its agent did. The suite makes it again. */
export const interruptedReason =
  'interrupted: the suite stopped before this run ended (a crash, a kill or Ctrl-C); a2rl suite run makes it again';

export function suiteLabel(suite: Pick<Suite, 'name'>, cellId: string): string {
  return `suite:${suite.name}/${cellId}`;
}

function agentSpec(agent: SuiteAgent, task: string): string {
  if (agent.agent !== undefined) return agent.agent;
  if (agent.command !== undefined) return `command:${agent.command}`;
  return `replay:${typeof agent.replay === 'string' ? agent.replay : agent.replay![task]}`;
}

export function planCells(suite: Suite): Cell[] {
  return suite.agents.flatMap((agent) => {
    const models = agent.models.length ? agent.models : [undefined];
    return models.flatMap((model) =>
      suite.tasks.map((task): Cell => {
        const id = model ? `${agent.id!}/${model.name}` : agent.id!;
        const budget = task.budget ?? suite.budget;
        return {
          id,
          agentId: agent.id!,
          agent: agentSpec(agent, task.id),
          model: model?.name,
          task,
          label: suiteLabel(suite, id),
          agentArgs: [...agent.args, ...(model?.args ?? [])],
          agentEnv: [...agent.env, ...(model?.env ?? [])],
          agentBinds: agent.bind,
          limits: parseBudget(budget, parseBudget(getTaskFile(task.id).defaultBudget, emptyLimits)),
          budget,
        };
      }),
    );
  });
}

/** A run of a suite, as the suite counts it. */
export type RunStanding = 'done' | 'failed' | 'interrupted' | 'unsettled';

/**
 * - done: the launcher saw its agent end (not stopped by the operator) and its infrastructure held: a result;
 * - failed: an infrastructure failure the launcher recorded (the agent never had the tools, its model never answered);
 * - interrupted: marked so when its suite stopped first;
 * - unsettled: its suite stopped before the launcher saw its end, and nobody has marked it yet.
 */
export function runStanding(store: Store, run: RunRow): RunStanding {
  if (run.infrastructure_failure !== null) return run.infrastructure_failure === interruptedReason ? 'interrupted' : 'failed';
  const exited = store.listEvents(run.id, 'agent').find((event) => event.name === 'exited');
  if (!exited || run.state !== 'ended') return 'unsettled';
  return (JSON.parse(exited.data) as { interrupted?: boolean }).interrupted ? 'unsettled' : 'done';
}

/**
 * The runs of each cell in the store: its label, on its task, whatever settings they were made with (a cell's budget,
 * args or env changed in the file since then: docs/reproducing.md says to rename it).
 */
export function cellRuns(store: Store, cells: readonly Cell[]): Map<Cell, RunRow[]> {
  return new Map(cells.map((cell) => [cell, store.runsLabelled(cell.task.id, cell.label)]));
}

export interface CellProgress {
  cell: Cell;
  done: number;
  /** Runs still to make: the repeats less those done. */
  missing: number;
  failed: number;
}

export function cellProgress(store: Store, cells: readonly Cell[], repeats: number): CellProgress[] {
  return [...cellRuns(store, cells)].map(([cell, runs]) => {
    const standings = runs.map((run) => runStanding(store, run));
    const done = standings.filter((standing) => standing === 'done').length;
    return { cell, done, missing: Math.max(0, repeats - done), failed: standings.filter((standing) => standing === 'failed').length };
  });
}

/** The plan as text: each cell, what it has and lacks, each run's limits, and the most the missing runs may spend. */
export function formatPlan(suite: Suite, progress: readonly CellProgress[], parallel: number): string {
  const lines = progress.map(
    ({ cell, done, missing, failed }) =>
      `  ${cell.id.padEnd(32)} ${cell.task.id.padEnd(20)} ${done}/${suite.repeats} done, ${missing} to run${failed ? `, ${failed} infrastructure failures so far` : ''}; each ${formatBudget(cell.limits)}`,
  );
  const toRun = progress.flatMap(({ cell, missing }) => Array.from({ length: missing }, () => cell.limits));
  const sum = (key: 'wallSeconds' | 'computeSeconds' | 'submissions' | 'rolloutEpisodes') =>
    toRun.reduce((total, limits) => total + limits[key], 0);
  // The wall clock at most: the runs' walls laid out `parallel` at a time, longest first.
  const lanes = new Array<number>(Math.max(1, parallel)).fill(0);
  for (const wall of toRun.map((limits) => limits.wallSeconds).sort((a, b) => b - a)) {
    lanes[lanes.indexOf(Math.min(...lanes))]! += wall;
  }
  return [
    `suite ${suite.name} (${suite.file}): ${progress.length} cells × ${suite.repeats} repeats, ${parallel} runs at once`,
    ...lines,
    `to run: ${toRun.length} runs; at most ${formatDuration(sum('wallSeconds'))} of agent wall clock, ${formatDuration(sum('computeSeconds'))} of compute, ` +
      `${sum('submissions')} submissions, ${sum('rolloutEpisodes')} rollout episodes; about ${formatDuration(Math.max(...lanes))} of wall clock at most ` +
      "(plus grading); model tokens and dollars are the agents' own, not capped by a2rl",
  ].join('\n');
}
