import { contaminationChecker } from '../../src/integrity/verdict.js';
import type { IntegrityVerdict, Store } from '../../src/store/store.js';

/**
 * Records a contamination check's verdict for a run a test wrote into its store, as the check process records one:
 * a seeded run with no check reads `incomplete` (never clean), so a test that ranks seeded runs says what they are.
 */
export function recordCheckVerdict(store: Store, runId: string, verdict: IntegrityVerdict = 'clean'): void {
  const coverage = { files: 1, bytes: 100, unread: [], unread_bytes: 0, unread_share: 0 };
  store.insertIntegrityCheck({
    run_id: runId,
    kind: 'contamination',
    verdict,
    checker: contaminationChecker,
    details: JSON.stringify({ matched: 0, coverage }),
    duration_ms: 1,
    created_at: Date.now(),
  });
}
