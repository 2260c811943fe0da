import { freeBytes } from '../util/disk-usage.js';
import { A2rlError } from '../util/errors.js';
import type { Logger } from '../util/logger.js';

/**
 * Free space on the server's home below which no tool call is admitted: room for the call's record, a `write_file`'s
 * 4 MiB message and the write-ahead log's next frames, so that a call the server lets act can still be recorded.
 */
export const minFreeBytesToAct = 8 * 2 ** 20;

/** Free space on the server's home below which `a2rl doctor` and the live view warn: a quarter of one run's default quota. */
export const lowFreeBytes = 2 ** 30;

/** How long a reading that found room is used again: every tool call asks, and a statfs per call is waste. */
const readingMs = 100;

/** Whether the store failed to write for want of space (SQLITE_FULL) or because the disk beneath it failed (SQLITE_IOERR). */
export function isStoreFull(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code === 'SQLITE_FULL' || code.startsWith('SQLITE_IOERR'));
}

/**
 * What a call the store cannot record is told: `after` says what became of it (by default, nothing was changed). A
 * failing disk (`SQLITE_IOERR*`, the store's error as `cause`) is named as such: freeing space would not help there.
 */
export function cannotRecord(after = 'Nothing was changed; try again later.', cause?: unknown): A2rlError {
  const code = (cause as { code?: unknown } | null | undefined)?.code;
  const why =
    typeof code === 'string' && code.startsWith('SQLITE_IOERR') ? "the server's disk failed (I/O error)" : "disk full on the server's home";
  return new A2rlError('UNAVAILABLE', `The server cannot record this call: ${why}. ${after}`, { cause });
}

/** A line warning that the home's disk is nearly full, or undefined while it has {@link lowFreeBytes} or more free. */
export function lowSpaceWarning(home: string): string | undefined {
  const free = freeBytes(home);
  if (free >= lowFreeBytes) return undefined;
  return `the disk of the server's home (${home}) has ${(free / 2 ** 20).toFixed(0)} MiB free, under ${lowFreeBytes / 2 ** 30} GiB: below ${minFreeBytesToAct / 2 ** 20} MiB every tool call is refused as UNAVAILABLE until space is freed`;
}

/**
 * The gate in front of every tool call: while the home has less than {@link minFreeBytesToAct} free, a call is refused
 * before it acts, so that no call acts that the store may not be able to record. While the home is full every call
 * reads it again, so the first call after space is freed is admitted: the server recovers by itself.
 */
export class RoomToRecord {
  private reading = { free: Number.POSITIVE_INFINITY, at: Number.NEGATIVE_INFINITY };

  constructor(
    private readonly home: string,
    private readonly logger: Logger,
  ) {}

  /** Throws `UNAVAILABLE` while the home is (nearly) full; the operator's log says when that starts and ends. */
  require(): void {
    const now = Date.now();
    const wasFull = this.reading.free < minFreeBytesToAct;
    if (wasFull || now - this.reading.at >= readingMs) {
      this.reading = { free: freeBytes(this.home), at: now };
      const full = this.reading.free < minFreeBytesToAct;
      if (full && !wasFull) {
        this.logger.error(
          { home: this.home, free_bytes: this.reading.free },
          "the home's disk is full: tool calls are refused until space is freed",
        );
      } else if (wasFull && !full)
        this.logger.info({ home: this.home, free_bytes: this.reading.free }, "the home's disk has room again: tool calls are admitted");
    }
    if (this.reading.free < minFreeBytesToAct) throw cannotRecord();
  }
}
