import { closeSync, ftruncateSync, openSync, readSync, writeSync } from 'node:fs';
import type { OutputSink } from '../../sandbox/contract.js';

/** How much of a job's output its log keeps: the first `headBytes` and the last `tailBytes`. */
export interface LogCap {
  headBytes: number;
  tailBytes: number;
}

/** 32 MiB per log by default: the first 16 (the setup, the first errors) and the last 16 (where it stands). */
export const defaultLogCap: LogCap = { headBytes: 16 * 2 ** 20, tailBytes: 16 * 2 ** 20 };

/** How often the kept tail of a log past its cap is written back to the file. */
const tailFlushMs = 1000;

/** Why a log stopped taking output before its job ended: the error its file gave (ENOSPC: the disk is full). */
export interface LogCut {
  error: string;
  /** Bytes of output the log had taken when it was cut. */
  atBytes: number;
}

/**
 * A job's log, bounded at the source: output is written through until the log holds
 * head + tail bytes; past that, the newest `tailBytes` are kept in a ring in memory and
 * written back after the head (with a line saying how much was dropped) about every
 * second and when the job ends. The file never grows past the cap plus that one line, and
 * writing never waits on anything but the page cache, so the job's pipe is always drained.
 * A write that fails (a full disk) cuts the log: a line says so where it stops, if it can be
 * written, `onCut` is told, and later output is dropped; the job goes on, its pipe drained.
 */
export class CappedLog implements OutputSink {
  private fd: number | undefined;
  /** Bytes of output received so far. */
  private received = 0;
  /** The kept tail once the log is past its cap: a ring whose oldest byte is at `ringStart`. */
  private ring: Buffer | undefined;
  private ringStart = 0;
  private flushTimer: NodeJS.Timeout | undefined;
  /** Set when a write failed: the log takes no more output. */
  cut: LogCut | undefined;

  constructor(
    readonly path: string,
    private readonly cap: LogCap,
    /** Told once, when a write fails and the log is cut; called from the job's output handler, so it must not throw. */
    private readonly onCut: (cut: LogCut) => void = () => undefined,
  ) {
    this.fd = openSync(path, 'w+');
  }

  write(chunk: Buffer): void {
    // An empty chunk changes nothing; at exactly the cap it would start the ring and a marker for 0 bytes dropped.
    if (this.fd === undefined || this.cut || chunk.length === 0) return;
    const cap = this.cap.headBytes + this.cap.tailBytes;
    if (this.received < cap) {
      const direct = chunk.subarray(0, cap - this.received);
      if (!this.writeOrCut(direct, this.received)) return;
      this.received += direct.length;
      chunk = chunk.subarray(direct.length);
      if (chunk.length === 0) return;
    }
    this.ring ??= this.readKeptTail();
    this.remember(chunk);
    this.received += chunk.length;
    this.flushTimer ??= setTimeout(() => this.flush(), tailFlushMs).unref();
  }

  /** Writes what is left of the tail and closes the file; later output is dropped. */
  close(): void {
    if (this.fd === undefined) return;
    this.flush();
    try {
      closeSync(this.fd);
    } catch {
      // A close that reports a failed write-back (a full network disk) leaves the log as it is.
    }
    this.fd = undefined;
  }

  /** Writes `data` at `position`, or cuts the log there when the file refuses it; whether it was written. */
  private writeOrCut(data: Buffer, position: number): boolean {
    try {
      writeAll(this.fd!, data, position);
      return true;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? String(error);
      this.cut = { error: code, atBytes: this.received };
      clearTimeout(this.flushTimer);
      this.ring = undefined;
      const note = Buffer.from(
        `\n[a2rl: this log was cut here: the server could not write it (${code}${code === 'ENOSPC' ? ": the server's disk is full" : ''}); the job's later output was dropped]\n`,
      );
      try {
        writeAll(this.fd!, note, position);
        ftruncateSync(this.fd!, position + note.length);
      } catch {
        // The note could not be written either: the job's record says it (onCut).
      }
      this.onCut(this.cut);
      return false;
    }
  }

  /** The last `tailBytes` written through, read back once when the log first passes its cap. */
  private readKeptTail(): Buffer {
    const ring = Buffer.alloc(this.cap.tailBytes);
    let read = 0;
    while (read < ring.length) {
      const n = readSync(this.fd!, ring, read, ring.length - read, this.cap.headBytes + read);
      if (n === 0) break;
      read += n;
    }
    return ring;
  }

  private remember(chunk: Buffer): void {
    const ring = this.ring!;
    if (chunk.length >= ring.length) {
      chunk.copy(ring, 0, chunk.length - ring.length);
      this.ringStart = 0;
      return;
    }
    const first = Math.min(chunk.length, ring.length - this.ringStart);
    chunk.copy(ring, this.ringStart, 0, first);
    chunk.copy(ring, 0, first);
    this.ringStart = (this.ringStart + chunk.length) % ring.length;
  }

  private flush(): void {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    if (this.fd === undefined || this.cut || !this.ring) return;
    const { headBytes, tailBytes } = this.cap;
    const dropped = this.received - headBytes - tailBytes;
    const marker = Buffer.from(
      `\n[a2rl: ${dropped} bytes of output dropped here; a job log keeps its first ${headBytes} and last ${tailBytes} bytes]\n`,
    );
    let at = headBytes;
    for (const part of [marker, this.ring.subarray(this.ringStart), this.ring.subarray(0, this.ringStart)]) {
      if (!this.writeOrCut(part, at)) return;
      at += part.length;
    }
    try {
      ftruncateSync(this.fd, at);
    } catch {
      // Shortening a file needs no space; a disk that fails even that is reported by the next write.
    }
  }
}

function writeAll(fd: number, data: Buffer, position: number): void {
  for (let done = 0; done < data.length;) done += writeSync(fd, data, done, data.length - done, position + done);
}
