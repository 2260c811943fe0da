import cliProgress from 'cli-progress';

export interface Progress {
  tick(detail?: string): void;
  stop(): void;
}

/** A progress bar on stderr for long work (exports, reports over many runs); silent unless stderr is a terminal. */
export function startProgress(label: string, total: number): Progress {
  if (!process.stderr.isTTY || total <= 1) return { tick: () => undefined, stop: () => undefined };
  const bar = new cliProgress.SingleBar(
    { format: `  ${label} {bar} {value}/{total} {detail}`, hideCursor: true, clearOnComplete: true, stream: process.stderr },
    cliProgress.Presets.shades_classic,
  );
  bar.start(total, 0, { detail: '' });
  return { tick: (detail = '') => bar.increment(1, { detail }), stop: () => bar.stop() };
}

/** How often a wait without a terminal says it is still waiting: a log then shows progress without a line a second. */
export const quietLineSeconds = 10;

/**
 * A wait of unknown length (a grading, a job, the next task): on a terminal one line that counts the seconds, else a
 * line every {@link quietLineSeconds} once it has lasted that long, so a log or CI shows the work is alive.
 */
export function startWaiting(
  label: string,
  stream: NodeJS.WriteStream = process.stderr,
): Progress & { print(line: string, to?: NodeJS.WritableStream): void } {
  const started = Date.now();
  const seconds = () => Math.round((Date.now() - started) / 1000);
  const tty = stream.isTTY === true;
  const timer = setInterval(
    () => stream.write(tty ? `\r  ${label}: ${seconds()} s` : `  ${label}: still waiting after ${seconds()} s\n`),
    tty ? 1000 : quietLineSeconds * 1000,
  ).unref();
  let stopped = false;
  return {
    tick: () => undefined,
    // A line of the work's own output, above the counting line.
    print: (line, to = stream) => {
      if (tty) stream.write('\r\x1b[K');
      to.write(`${line}\n`);
    },
    stop: () => {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      if (tty && seconds() >= 1) stream.write('\r\x1b[K');
    },
  };
}
