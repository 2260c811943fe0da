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
