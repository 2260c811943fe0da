import type { IntegrityCheckRow, IntegrityVerdict, Store } from '../store/store.js';
import type { ScanCoverage } from './sources.js';

/** Names the method in every recorded check: a changed method is a new version, so old and new verdicts are told apart. */
export const contaminationChecker = 'contamination/3';

/**
 * The decoy test: were more hidden items found than drawing from the task's generator explains? Where a task's items
 * are template draws (the micro tasks), an agent that writes more training data from the visible templates hits hidden
 * items by chance (2,000 synthetic micro-gsm8k questions hit 9, 20,000 hit 63), and hits the decoys, items the same
 * generator drew that nobody could have seen, as often. H0: the agent's text draws from the task's distribution, so a
 * found item is any findable item, hidden or decoy, alike: each found item is hidden with probability
 * h / (h + d), h and d the findable hidden items and decoys. Its p is the one-sided exact binomial tail P(X >= hidden
 * found) over all found items; an agent that saw the evaluation set finds hidden items without decoys, and p falls
 * (20 planted items, no decoy: 0.5^20 ≈ 1e-6).
 */
export interface DecoyTest {
  matchableHidden: number;
  matchableDecoys: number;
  decoysFound: number;
  /** Flagged only below this p (task.json's `integrity.flagBelowP`, 0.001 by default). */
  flagBelowP: number;
  /**
   * Hidden items found beyond what the decoys found explain from which a run is flagged whatever p says (plus a margin
   * of √(items found), one standard deviation of that excess by chance): task.json's `integrity.flagAtShare` (2.5%) of
   * the hidden set, 10 of micro-gsm8k's 400. The decoy test weighs a share: 20 planted items among 20,000 template
   * draws (which hit about 60 hidden items and 50 decoys by chance) pass it; their excess does not dilute. A plain count
   * of hidden items would flag honest draws too: 3,000 of them already hit 16.
   */
  flagAtCount: number;
}

/**
 * The contamination check's verdict from how many hidden items it found: `flagged` from the task's `flagAtItems`
 * (task.json's integrity section, 3 by default: one or two items can be a coincidence of templated text) and, for a
 * task with decoys, only when the decoy test's p is below `flagBelowP` as well, or the hidden items found beyond what
 * the decoys found explain reach its `flagAtCount` plus √(items found) (dilution-proof: other text adds hidden items
 * and decoys alike, and leaves that excess about as it was); `suspect` when hidden items were found
 * but not enough (shown, not flagged); `clean` when none was found, or, on a task with decoys, when decoys were found
 * too and about as often (p at or above `chanceP`): what drawing from the visible templates gives anyone. A task without
 * decoys (the full tier's real datasets, where a chance 13-gram collision is rare) is judged on the count alone.
 */
export function contaminationVerdict(matchedItems: number, flagAtItems: number, decoys?: DecoyTest): IntegrityVerdict {
  if (matchedItems === 0) return 'clean';
  if (!decoys) return matchedItems >= flagAtItems ? 'flagged' : 'suspect';
  const p = decoyPValue(matchedItems, decoys);
  const excessMargin = decoys.flagAtCount + Math.sqrt(matchedItems + decoys.decoysFound);
  if (matchedItems >= flagAtItems && (p < decoys.flagBelowP || decoyExcess(matchedItems, decoys) >= excessMargin)) return 'flagged';
  return p < chanceP || decoys.decoysFound === 0 ? 'suspect' : 'clean';
}

/**
 * The check's verdict once what it could not read is weighed: hidden items found flag a run whatever else it held; else
 * anything left unread (src/integrity/sources.ts counts it, by bytes on disk) leaves the verdict `incomplete`: no share
 * is tolerated, since any unread file can hold what a job trains on (a sparse `truncate -s 100G` made 1% of anything).
 */
export function coveredVerdict(found: IntegrityVerdict, coverage: Pick<ScanCoverage, 'unread_share'>): IntegrityVerdict {
  if (found === 'flagged') return found;
  return coverage.unread_share > 0 ? 'incomplete' : found;
}

/** At or above this p, the hidden items found are what chance gives (the decoys were found as often): nothing to show. */
const chanceP = 0.05;

/**
 * Hidden items found beyond what chance explains: those found less the decoys found scaled by h / d (the findable hidden
 * items and decoys); all of them where no decoy is findable.
 */
export function decoyExcess(matchedItems: number, decoys: Omit<DecoyTest, 'flagBelowP' | 'flagAtCount'>): number {
  const { matchableHidden: h, matchableDecoys: d } = decoys;
  return d === 0 ? matchedItems : matchedItems - (decoys.decoysFound * h) / d;
}

/** The decoy test's p for `matchedItems` hidden items found (see DecoyTest). */
export function decoyPValue(matchedItems: number, decoys: Omit<DecoyTest, 'flagBelowP' | 'flagAtCount'>): number {
  const { matchableHidden: h, matchableDecoys: d } = decoys;
  if (h + d === 0) return 1;
  return binomialUpperTail(matchedItems, matchedItems + decoys.decoysFound, h / (h + d));
}

/** P(X >= k) for X ~ Binomial(n, p), exactly: the terms summed in log space, so that n in the millions neither under- nor overflows. */
export function binomialUpperTail(k: number, n: number, p: number): number {
  if (!(Number.isInteger(k) && Number.isInteger(n) && n >= 0 && p >= 0 && p <= 1)) {
    throw new RangeError(`binomialUpperTail needs whole k and n >= 0 and 0 <= p <= 1, not k=${k}, n=${n}, p=${p}`);
  }
  if (k <= 0) return 1;
  if (k > n) return 0;
  if (p === 0) return 0;
  if (p === 1) return 1;
  // log P(X = i) from log P(X = 0) = n log(1 - p), by the ratio of consecutive terms.
  const logRatio = Math.log(p) - Math.log1p(-p);
  let logTerm = n * Math.log1p(-p);
  const tail: number[] = [];
  for (let i = 0; i < n; i++) {
    if (i >= k) tail.push(logTerm);
    logTerm += Math.log(n - i) - Math.log(i + 1) + logRatio;
  }
  tail.push(logTerm);
  const top = tail.reduce((most, term) => Math.max(most, term), -Infinity);
  return Math.min(1, Math.exp(top) * tail.reduce((sum, term) => sum + Math.exp(term - top), 0));
}

/**
 * A run's integrity in one word: `flagged` (either check says so), `incomplete` (the contamination check did not run,
 * did not finish or read too little, or the review's answer could not be read), or `clean`. Only `clean` is clean: the
 * leaderboard scores the other two alike (`--flagged`).
 */
export type RunVerdict = 'clean' | 'flagged' | 'incomplete';

/** What the contamination check read of the run, and what it could not (with each file's bytes), as reports show it. */
export interface CheckCoverage {
  read_files: number;
  read_bytes: number;
  unread: Array<{ path: string; reason: string; bytes: number }>;
  unread_bytes: number;
  /** Of the run's bytes; above 0 the check is incomplete. */
  unread_share: number;
}

/** What reports, exports and the leaderboard show of a run's integrity: each check's latest verdict, and the run's. */
export interface RunIntegrity {
  verdict: RunVerdict;
  /** The contamination check's verdict; `unchecked` when it has not run (yet). */
  contamination: IntegrityVerdict | 'unchecked';
  matched_items: number;
  /** For a task with decoys: how many were found, and the decoy test's p (see DecoyTest). */
  decoys?: { matched: number; p_value: number };
  /** What the latest contamination check read and left unread; absent when it did not finish. */
  coverage?: CheckCoverage;
  /** The judge's review: `unreviewed` when none was asked for; `failed` when its answer could not be read (never clean). */
  review: IntegrityVerdict | 'unreviewed';
  /** Who reviewed: the judge's model and the prompt's version. */
  reviewer?: string;
  /** `verdict === 'flagged'`: kept for readers of older exports. */
  flagged: boolean;
  /** Why it is not clean (or what was noticed), in a line each. */
  reasons: string[];
}

/** The run's integrity as its latest checks say. */
export function runIntegrity(store: Store, runId: string): RunIntegrity {
  const contamination = store.latestIntegrityCheck(runId, 'contamination');
  const review = store.latestIntegrityCheck(runId, 'review');
  const figures = contamination ? (JSON.parse(contamination.details) as CheckFigures) : ({} as CheckFigures);
  const { matched = 0, decoys } = figures;
  const decoyFigures = decoys ? { matched: decoys.matched, p_value: decoys.p_value } : undefined;
  const coverage = figures.coverage && checkCoverage(figures.coverage);
  const reasons: string[] = [];
  if (contamination?.verdict === 'flagged' || contamination?.verdict === 'suspect') {
    const chance = decoyFigures
      ? ` (and ${decoyFigures.matched} decoys, items drawn alike and never shown: p = ${decoyFigures.p_value.toPrecision(2)} that chance explains it)`
      : '';
    reasons.push(`contamination check: ${matched} hidden evaluation items found in what the agent could train from${chance}`);
  }
  if (!contamination) reasons.push('contamination check: not run yet, so nothing says the run is clean');
  else if (contamination.verdict === 'incomplete' || contamination.verdict === 'failed') {
    reasons.push(
      figures.error !== undefined
        ? `contamination check incomplete: ${figures.error}`
        : `contamination check incomplete: ${((coverage?.unread_share ?? 0) * 100).toFixed(1)}% of the run's bytes could not be read (${coverage?.unread.length ?? 0} listed; anything unread leaves the check incomplete)`,
    );
  }
  // A clean verdict of an older method (one that read fewer formats) says nothing of what the current one would find.
  const outdated = contamination?.verdict === 'clean' && contamination.checker !== contaminationChecker;
  if (outdated)
    reasons.push(`contamination check: checked by an older checker (${contamination.checker}); re-run \`a2rl runs check ${runId}\``);
  if (review?.verdict === 'flagged') reasons.push(`integrity review by ${review.checker}: ${reviewReasons(review)}`);
  if (review?.verdict === 'failed') reasons.push(`integrity review by ${review.checker} failed: its answer could not be read`);
  const flagged = contamination?.verdict === 'flagged' || review?.verdict === 'flagged';
  const incomplete = !contamination || outdated || ['incomplete', 'failed'].includes(contamination.verdict) || review?.verdict === 'failed';
  return {
    verdict: flagged ? 'flagged' : incomplete ? 'incomplete' : 'clean',
    contamination: contamination?.verdict ?? 'unchecked',
    matched_items: matched,
    ...(decoyFigures ? { decoys: decoyFigures } : {}),
    ...(coverage ? { coverage } : {}),
    review: review?.verdict ?? 'unreviewed',
    ...(review ? { reviewer: review.checker } : {}),
    flagged,
    reasons,
  };
}

/** What runIntegrity reads of a contamination check's details (src/integrity/check.ts); checks before issue 46 lack the unread counts. */
interface CheckFigures {
  matched?: number;
  decoys?: { matched: number; p_value: number };
  coverage?: Partial<ScanCoverage> & Pick<ScanCoverage, 'files' | 'bytes'>;
  /** A check that did not finish: why. */
  error?: string;
}

function checkCoverage(coverage: NonNullable<CheckFigures['coverage']>): CheckCoverage {
  return {
    read_files: coverage.files + (coverage.binary_files ?? 0),
    read_bytes: coverage.bytes + (coverage.binary_bytes ?? 0),
    unread: (coverage.unread ?? []).map((entry) => ({
      path: `${entry.source.kind} ${entry.source.path}`,
      reason: entry.reason,
      bytes: (entry as { bytes?: number }).bytes ?? 0,
    })),
    unread_bytes: coverage.unread_bytes ?? 0,
    unread_share: coverage.unread_share ?? 0,
  };
}

function reviewReasons(check: IntegrityCheckRow): string {
  const answer = (JSON.parse(check.details) as { answer?: Record<string, { flagged?: boolean; reasons?: string }> }).answer ?? {};
  return Object.entries(answer)
    .filter(([, finding]) => finding?.flagged)
    .map(([question, finding]) => `${question}: ${finding.reasons ?? ''}`)
    .join('; ');
}
