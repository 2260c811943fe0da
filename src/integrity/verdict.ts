import type { IntegrityCheckRow, IntegrityVerdict, Store } from '../store/store.js';

/**
 * The decoy test: were more hidden items found than drawing from the task's generator explains? Where a task's items
 * are template draws (the micro tasks), an agent that writes more training data from the visible templates hits hidden
 * items by chance (2,000 synthetic micro-gsm8k questions hit 7, 20,000 hit 54), and hits the decoys, items the same
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
}

/**
 * The contamination check's verdict from how many hidden items it found: `flagged` from the task's `flagAtItems`
 * (task.json's integrity section, 3 by default: one or two items can be a coincidence of templated text) and, for a
 * task with decoys, only when the decoy test's p is below `flagBelowP` as well; `suspect` when hidden items were found
 * but not enough (shown, not flagged); `clean` when none was found, or, on a task with decoys, when decoys were found
 * too and about as often (p at or above `chanceP`): what drawing from the visible templates gives anyone. A task without
 * decoys (the full tier's real datasets, where a chance 13-gram collision is rare) is judged on the count alone.
 */
export function contaminationVerdict(matchedItems: number, flagAtItems: number, decoys?: DecoyTest): IntegrityVerdict {
  if (matchedItems === 0) return 'clean';
  if (!decoys) return matchedItems >= flagAtItems ? 'flagged' : 'suspect';
  const p = decoyPValue(matchedItems, decoys);
  if (matchedItems >= flagAtItems && p < decoys.flagBelowP) return 'flagged';
  return p < chanceP || decoys.decoysFound === 0 ? 'suspect' : 'clean';
}

/** At or above this p, the hidden items found are what chance gives (the decoys were found as often): nothing to show. */
const chanceP = 0.05;

/** The decoy test's p for `matchedItems` hidden items found (see DecoyTest). */
export function decoyPValue(matchedItems: number, decoys: Omit<DecoyTest, 'flagBelowP'>): number {
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

/** What reports, exports and the leaderboard show of a run's integrity: each check's latest verdict, and whether the run is flagged. */
export interface RunIntegrity {
  /** The contamination check's verdict; `unchecked` when it has not run (yet). */
  contamination: IntegrityVerdict | 'unchecked';
  /** Hidden items the contamination check found. */
  matched_items: number;
  /** For a task with decoys: how many were found, and the decoy test's p (see DecoyTest). */
  decoys?: { matched: number; p_value: number };
  /** The judge's review: `unreviewed` when none was asked for; `failed` when its answer could not be read (never clean). */
  review: IntegrityVerdict | 'unreviewed';
  /** Who reviewed: the judge's model and the prompt's version. */
  reviewer?: string;
  /** Flagged by either: the leaderboard scores it as the operator says (`--flagged`), nothing is deleted. */
  flagged: boolean;
  /** Why, in a line each. */
  reasons: string[];
}

/** The run's integrity as its latest checks say. */
export function runIntegrity(store: Store, runId: string): RunIntegrity {
  const contamination = store.latestIntegrityCheck(runId, 'contamination');
  const review = store.latestIntegrityCheck(runId, 'review');
  const { matched = 0, decoys } = contamination ? (JSON.parse(contamination.details) as CheckFigures) : ({} as CheckFigures);
  const decoyFigures = decoys ? { matched: decoys.matched, p_value: decoys.p_value } : undefined;
  const reasons: string[] = [];
  if (contamination?.verdict === 'flagged' || contamination?.verdict === 'suspect') {
    const chance = decoyFigures
      ? ` (and ${decoyFigures.matched} decoys, items drawn alike and never shown: p = ${decoyFigures.p_value.toPrecision(2)} that chance explains it)`
      : '';
    reasons.push(`contamination check: ${matched} hidden evaluation items found in what the agent could train from${chance}`);
  }
  if (review?.verdict === 'flagged') reasons.push(`integrity review by ${review.checker}: ${reviewReasons(review)}`);
  if (review?.verdict === 'failed') reasons.push(`integrity review by ${review.checker} failed: its answer could not be read`);
  return {
    contamination: contamination?.verdict ?? 'unchecked',
    matched_items: matched,
    ...(decoyFigures ? { decoys: decoyFigures } : {}),
    review: review?.verdict ?? 'unreviewed',
    ...(review ? { reviewer: review.checker } : {}),
    flagged: contamination?.verdict === 'flagged' || review?.verdict === 'flagged',
    reasons,
  };
}

/** What runIntegrity reads of a contamination check's details (src/integrity/check.ts). */
interface CheckFigures {
  matched?: number;
  decoys?: { matched: number; p_value: number };
}

function reviewReasons(check: IntegrityCheckRow): string {
  const answer = (JSON.parse(check.details) as { answer?: Record<string, { flagged?: boolean; reasons?: string }> }).answer ?? {};
  return Object.entries(answer)
    .filter(([, finding]) => finding?.flagged)
    .map(([question, finding]) => `${question}: ${finding.reasons ?? ''}`)
    .join('; ');
}
