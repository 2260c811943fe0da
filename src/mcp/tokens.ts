import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { A2rlError } from '../util/errors.js';
import { eventRecorder } from '../store/events.js';
import type { Store } from '../store/store.js';

/** Run tokens are bearer secrets: 32 random bytes, base64url; the store keeps their SHA-256 only. */
export function issueRunToken(store: Store, runId: string): string {
  const token = randomBytes(32).toString('base64url');
  store.insertRunToken(runId, hashToken(token), Date.now());
  return token;
}

function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** Equal-length digests compared in constant time, so timing tells nothing about the secret. */
function digestsEqual(a: string, b: string): boolean {
  return timingSafeEqual(Buffer.from(a, 'hex'), Buffer.from(b, 'hex'));
}

/** The run a presented token opens, or undefined when it is unknown or revoked. */
export function runOfToken(store: Store, token: string): string | undefined {
  const hash = hashToken(token);
  const row = store.findRunToken(hash);
  if (!row || row.revoked_at !== null || !digestsEqual(row.token_hash, hash)) return undefined;
  return row.run_id;
}

/**
 * The run each presented token opens, remembered so that a request pays neither the hash nor
 * the store lookup again, and forgotten whenever a token may have been revoked (the store's
 * changesVersion): a revoked token is refused from the next request on.
 */
export class RunTokenCache {
  private readonly runs = new Map<string, string>();
  private version = '';

  constructor(
    private readonly store: Store,
    private readonly maxEntries = 10_000,
  ) {}

  runOf(token: string): string | undefined {
    const version = this.store.changesVersion();
    if (version !== this.version) {
      this.runs.clear();
      this.version = version;
    }
    const cached = this.runs.get(token);
    if (cached !== undefined) return cached;
    const runId = runOfToken(this.store, token);
    // Only valid tokens are kept, and not without bound: wrong ones are looked up each time.
    if (runId !== undefined && this.runs.size < this.maxEntries) this.runs.set(token, runId);
    return runId;
  }
}

export function adminTokenMatches(expected: string, presented: string): boolean {
  return digestsEqual(hashToken(expected), hashToken(presented));
}

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  return match?.[1];
}

/**
 * Revokes a run's token and ends the run: its sessions are refused from the next request
 * on, and the server that serves it stops its jobs within a second.
 */
export function revokeRun(store: Store, runId: string): void {
  const run = store.getRun(runId);
  if (!run) throw new A2rlError('NOT_FOUND', `No run "${runId}"; list runs with a2rl runs list.`);
  if (!store.getRunToken(runId)) {
    throw new A2rlError('INVALID_INPUT', `Run ${runId} is served over stdio and has no token; it ends when its client disconnects.`);
  }
  const reason = 'revoked by the operator';
  if (store.revokeRun(runId, reason, Date.now())) eventRecorder(store, runId, run.created_at)('run', 'ended', { reason });
}
