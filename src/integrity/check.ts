import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { IntegrityCheckRow, Store } from '../store/store.js';
import { preparedAssetPaths } from '../tasks/assets.js';
import { getTaskFile, type TaskFile } from '../tasks/task.js';
import { A2rlError } from '../util/errors.js';
import { tasksRoot } from '../util/paths.js';
import { ContaminationScan, type Evidence, HiddenIndex } from './hidden-index.js';
import { readDecoyItems, readHiddenItems } from './hidden-items.js';
import { type ScanCoverage, scanRunSources } from './sources.js';
import type { UnfinishedCheck } from './background.js';
import { contaminationChecker, contaminationVerdict, coveredVerdict, decoyPValue } from './verdict.js';

/** What a contamination check records (the row's details). */
export interface ContaminationDetails {
  task: string;
  settings: { n: number; min_tokens: number; window: number; flag_at_items: number; flag_below_p: number; flag_at_share: number };
  /** Hidden items in both halves, and those that can be found at all (not all public material, long enough). */
  items: number;
  matchable: number;
  matched: number;
  matched_items: Array<{ id: string; half: string; evidence: Evidence[] }>;
  /**
   * For a task whose generator drew decoys (`<evalDir>/decoys.jsonl`): how many there are, can be found and were found,
   * and the decoy test's p that chance explains the hidden items found (src/integrity/verdict.ts, DecoyTest).
   */
  decoys?: { items: number; matchable: number; matched: number; matched_ids: string[]; p_value: number };
  coverage: ScanCoverage;
  /** Wall time of each phase, for the cost of a check. */
  timings_ms: { index: number; scan: number };
}

/** Where a task's hidden items and public material lie: micro tasks in their folder, full tasks in the home's prepared assets. */
function taskMaterial(file: TaskFile, home: string, baseModel: string | null): { evalDir: string; publicPaths: string[] } {
  const dir = join(tasksRoot, file.id);
  const library = join(tasksRoot, file.library);
  const instructions = join(dir, file.instructions);
  if (file.tier === 'micro') {
    return {
      evalDir: join(dir, file.evalData),
      publicPaths: [join(dir, file.trainData), instructions, library, join(dir, file.env.dir)],
    };
  }
  const assets = preparedAssetPaths(file.id, home, baseModel ?? file.defaultModel);
  return { evalDir: assets.eval, publicPaths: [assets.data, instructions, library] };
}

const publicTextSuffixes = ['.jsonl', '.json', '.md', '.txt', '.py', '.csv'];

/** The texts of the task's public material (files, or every text file under a folder). */
function publicTexts(paths: string[]): string[] {
  const texts: string[] = [];
  const visit = (path: string) => {
    if (!existsSync(path)) return;
    if (statSync(path).isDirectory()) {
      for (const name of readdirSync(path).sort()) if (name !== '__pycache__') visit(join(path, name));
    } else if (publicTextSuffixes.some((suffix) => path.endsWith(suffix))) texts.push(readFileSync(path, 'utf8'));
  };
  paths.forEach(visit);
  return texts;
}

/**
 * The contamination check of one run: the task's hidden evaluation items (both halves) looked for in everything the
 * agent could train from (src/integrity/sources.ts), by long n-grams after normalisation (src/integrity/tokens.ts)
 * and by exact pairs (a question with its final answer, a game id with its spec), with what the task's public
 * material holds left out. Synchronous and heavy: run it in a worker (src/integrity/background.ts) or a CLI process.
 */
export function checkContamination(store: Store, home: string, runId: string): ContaminationDetails {
  const run = store.getRun(runId);
  if (!run) throw new A2rlError('NOT_FOUND', `No run "${runId}" in ${home}; a2rl runs list shows the runs.`);
  const file = getTaskFile(run.task_id);
  const { ngram: n, minTokens, window, flagAtItems, flagBelowP, flagAtShare, items: kind } = file.integrity;
  const started = Date.now();
  const { evalDir, publicPaths } = taskMaterial(file, home, run.base_model);
  const hidden = readHiddenItems(evalDir, kind);
  // Decoys are indexed and found exactly as the hidden items are; they follow them in `items`.
  const decoys = readDecoyItems(evalDir, kind);
  const items = [...hidden, ...decoys];
  const isHidden = (item: number) => item < hidden.length;
  const index = new HiddenIndex(items, { n, minTokens, window });
  for (const text of publicTexts(publicPaths)) index.markPublic(text);
  const indexed = Date.now();
  const scan = new ContaminationScan(index);
  const coverage = scanRunSources(store, home, run, scan);
  const found = [...scan.found.entries()].sort(([a], [b]) => a - b);
  const matchedItems = found
    .filter(([item]) => isHidden(item))
    .map(([item, evidence]) => ({ id: items[item]!.id, half: items[item]!.half, evidence }));
  const matchable = [...index.matchable()];
  const matchableHidden = matchable.filter(isHidden).length;
  const decoysFound = found.filter(([item]) => !isHidden(item)).map(([item]) => items[item]!.id);
  const decoyTest = { matchableHidden, matchableDecoys: matchable.length - matchableHidden, decoysFound: decoysFound.length };
  return {
    task: file.id,
    settings: { n, min_tokens: minTokens, window, flag_at_items: flagAtItems, flag_below_p: flagBelowP, flag_at_share: flagAtShare },
    items: hidden.length,
    matchable: matchableHidden,
    matched: matchedItems.length,
    matched_items: matchedItems,
    ...(decoys.length > 0
      ? {
          decoys: {
            items: decoys.length,
            matchable: decoyTest.matchableDecoys,
            matched: decoysFound.length,
            matched_ids: decoysFound,
            p_value: decoyPValue(matchedItems.length, decoyTest),
          },
        }
      : {}),
    coverage,
    timings_ms: { index: indexed - started, scan: Date.now() - indexed },
  };
}

/** Runs the check and records its verdict in the store; a check that cannot run is recorded as incomplete, with why. */
export function recordContaminationCheck(
  store: Store,
  home: string,
  runId: string,
): { verdict: string; details: ContaminationDetails | { error: string } } {
  if (!store.getRun(runId)) throw new A2rlError('NOT_FOUND', `No run "${runId}" in ${home}; a2rl runs list shows the runs.`);
  const started = Date.now();
  let checked: ContaminationDetails;
  try {
    checked = checkContamination(store, home, runId);
  } catch (error) {
    // The store's own failure (busy, full) is not the run's: its process reports it, and the run is checked again.
    if (error instanceof Error && error.name === 'SqliteError') throw error;
    const reason = error instanceof Error ? error.message : String(error);
    recordIncompleteContaminationCheck(store, runId, { reason, elapsedMs: Date.now() - started, interrupted: false });
    return { verdict: 'incomplete', details: { error: reason } };
  }
  const { decoys, settings } = checked;
  const found = contaminationVerdict(
    checked.matched,
    settings.flag_at_items,
    decoys && {
      matchableHidden: checked.matchable,
      matchableDecoys: decoys.matchable,
      decoysFound: decoys.matched,
      flagBelowP: settings.flag_below_p,
      flagAtCount: Math.ceil(settings.flag_at_share * checked.items),
    },
  );
  const verdict = coveredVerdict(found, checked.coverage);
  store.insertIntegrityCheck({
    run_id: runId,
    kind: 'contamination',
    verdict,
    checker: contaminationChecker,
    details: JSON.stringify(checked),
    duration_ms: Date.now() - started,
    created_at: Date.now(),
  });
  return { verdict, details: checked };
}

/**
 * Records a check that could not finish as `incomplete`, with why: one that threw, or whose process ran out of time or
 * memory, crashed or was stopped with its server (`interrupted`: the next server to start checks the run again,
 * src/core/engine.ts). A run's check is never left reading `unchecked` or clean for those.
 */
export function recordIncompleteContaminationCheck(store: Store, runId: string, unfinished: UnfinishedCheck): void {
  // A finished verdict recorded since this check started (another process's, after this one's ended) is newer: kept.
  const latest = store.latestIntegrityCheck(runId, 'contamination');
  if (latest && latest.created_at >= Date.now() - unfinished.elapsedMs && !checkInterrupted(latest)) return;
  store.insertIntegrityCheck({
    run_id: runId,
    kind: 'contamination',
    verdict: 'incomplete',
    checker: contaminationChecker,
    details: JSON.stringify({ error: unfinished.reason, interrupted: unfinished.interrupted }),
    duration_ms: unfinished.elapsedMs,
    created_at: Date.now(),
  });
}

/** Whether a recorded check was cut short by the store or its server rather than by the run (checked again). */
function checkInterrupted(check: IntegrityCheckRow): boolean {
  return (JSON.parse(check.details) as { interrupted?: boolean }).interrupted === true;
}

/** Whether the run's contamination check recorded a verdict it finished (clean, flagged, or incomplete for the run's own files). */
export function hasFinishedContaminationCheck(store: Store, runId: string): boolean {
  const latest = store.latestIntegrityCheck(runId, 'contamination');
  return latest !== undefined && !checkInterrupted(latest);
}
