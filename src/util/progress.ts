import cliProgress from 'cli-progress';
import { isMainThread } from 'node:worker_threads';
import { formatDuration } from './duration.js';

/**
 * Long work's progress on stderr (never stdout: in `serve`'s stdio mode stdout is the protocol): on a terminal a bar
 * (or, when the total is unknown, a counting line) redrawn in place; without one, a {@link progressLine} every few
 * seconds while the work lasts, never one per item, so a log or CI shows the work alive without filling up.
 */
export interface Progress {
  /** One item done; `detail`, if given, names it (or what comes next). */
  tick(detail?: string): void;
  /** Names the item under way, shown until the next tick or note. */
  note(detail: string): void;
  /** A line of the work's own output, above a bar or counting line (stderr unless `to` says otherwise). */
  print(line: string, to?: Pick<NodeJS.WritableStream, 'write'>): void;
  /** Ends it; a later call does nothing (a command stops it before its output, and again on its way out). */
  stop(): void;
}

/** Where progress goes and its clock: stderr and the real clock, or a test's own of both. */
export interface ProgressOptions {
  stream?: Pick<NodeJS.WriteStream, 'write'> & { isTTY?: boolean };
  now?: () => number;
  /** Without a terminal, seconds between lines; 0: a line at each item (default {@link progressLineSeconds}). */
  everySeconds?: number;
}

/** Seconds between lines without a terminal: $A2RL_PROGRESS_SECONDS, else 10. */
function progressLineSeconds(): number {
  const seconds = Number(process.env.A2RL_PROGRESS_SECONDS);
  return process.env.A2RL_PROGRESS_SECONDS && Number.isFinite(seconds) && seconds >= 0 ? seconds : 10;
}

/** How far the work is: items done (of the total, where known), the time so far and, once an item is done, an ETA. */
export function progressLine(label: string, done: number, total: number | undefined, elapsedMs: number, detail = ''): string {
  const count = total === undefined ? (done > 0 ? `${done} done, ` : '') : `${done}/${total} done, `;
  const eta =
    total !== undefined && done > 0 && done < total ? `, ETA ${formatDuration(((elapsedMs / done) * (total - done)) / 1000)}` : '';
  return `  ${label}: ${count}${formatDuration(elapsedMs / 1000)} so far${eta}${detail ? `; ${detail}` : ''}`;
}

/** Progress through `total` items (steps of a replay, tasks of a demo), or through work of unknown length (`undefined`). */
export function startProgress(label: string, total: number | undefined, options: ProgressOptions = {}): Progress {
  const progress = progressOn(label, total, options);
  let stopped = false;
  return {
    ...progress,
    stop: () => {
      if (stopped) return;
      stopped = true;
      progress.stop();
    },
  };
}

/** The progress display `startProgress` picks for its stream: a bar, a counting line, or log lines. */
function progressOn(label: string, total: number | undefined, options: ProgressOptions): Progress {
  // A worker thread (the view's) shows nothing: its lines would land in the server's log.
  if (!isMainThread && !options.stream) {
    return {
      tick: () => undefined,
      note: () => undefined,
      print: (line, to = process.stderr) => to.write(`${line}\n`),
      stop: () => undefined,
    };
  }
  const stream = options.stream ?? process.stderr;
  const now = options.now ?? Date.now;
  const started = now();
  let done = 0;
  let detail = '';
  if (stream.isTTY && total !== undefined) {
    const bar = new cliProgress.SingleBar(
      {
        format: `  ${label} {bar} {value}/{total} ETA {eta_formatted} {detail}`,
        hideCursor: true,
        clearOnComplete: true,
        stream: stream as NodeJS.WriteStream,
      },
      cliProgress.Presets.shades_classic,
    );
    bar.start(total, 0, { detail: '' });
    return {
      tick: (next) => bar.increment(1, next === undefined ? {} : { detail: next }),
      note: (next) => bar.update({ detail: next }),
      print: (line, to = stream) => {
        stream.write('\r\x1b[K');
        to.write(`${line}\n`);
        bar.render();
      },
      stop: () => bar.stop(),
    };
  }
  if (stream.isTTY) {
    // Unknown length: one line counting the seconds, redrawn each second once the work has lasted one.
    const draw = () => stream.write(`\r\x1b[K${progressLine(label, done, total, now() - started, detail).slice(0, 150)}`);
    const timer = setInterval(draw, 1000).unref();
    return {
      tick: (next) => {
        done++;
        detail = next ?? detail;
      },
      note: (next) => (detail = next),
      print: (line, to = stream) => {
        stream.write('\r\x1b[K');
        to.write(`${line}\n`);
      },
      stop: () => {
        clearInterval(timer);
        if (now() - started >= 1000) stream.write('\r\x1b[K');
      },
    };
  }
  const everyMs = (options.everySeconds ?? progressLineSeconds()) * 1000;
  let lastLine = started;
  /** Items done at the last line printed; undefined before the first. */
  let printed: number | undefined;
  const line = () => {
    lastLine = now();
    printed = done;
    stream.write(`${progressLine(label, done, total, lastLine - started, detail)}\n`);
  };
  const due = () => {
    if (now() - lastLine >= everyMs) line();
  };
  // A long item still shows the work is alive; the clock decides, so a test's clock that stands still prints nothing.
  const timer = everyMs > 0 ? setInterval(due, Math.min(everyMs, 1000)).unref() : undefined;
  return {
    tick: (next) => {
      done++;
      detail = next ?? detail;
      due();
    },
    note: (next) => (detail = next),
    print: (text, to = stream) => to.write(`${text}\n`),
    stop: () => {
      clearInterval(timer);
      // The end, where lines were printed: the log then says it finished, and in how long.
      if (printed !== undefined && printed !== done) {
        detail = '';
        line();
      }
    },
  };
}
