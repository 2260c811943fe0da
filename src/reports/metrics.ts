/**
 * The training loss in a job's log, as the view's chart and the report read it. One line gives one point when it
 * names a loss, in any of the forms training loops print:
 * - key=value or words: `step 50/800 loss 0.521 lr 1e-3` (as `microlm.train.fit` prints it), `step=3 loss=0.5`;
 * - Hugging Face Trainer dicts, a Python repr: `{'loss': 0.52, 'grad_norm': 1.3, 'learning_rate': 5e-05, 'epoch': 0.1}`;
 * - JSON lines: `{"step": 3, "loss": 0.5}`.
 * Only a key that is `loss` itself (or `train/loss`) counts: `eval_loss` and the Trainer's closing `train_loss` (an
 * average) are other series.
 *
 * A step counter that goes back is a restart (a job that resumed from a checkpoint, or a loop started over): a new
 * segment, placed after the last point with a gap, never a line drawn back over the old one. Unless the epoch went up
 * with it: steps counted within each epoch, and the line goes on. Non-finite and huge values
 * (nan, inf, 1e308: a diverged run) are left out and counted, so one of them cannot squash the chart's scale.
 */

/** One point of the chart: x (the step, continued after the last segment's end past a restart) and the loss; a null loss is a gap. */
export type CurvePoint = [x: number, loss: number | null];

/** Values above this (in magnitude) are an overflow, not a loss: left out as non-finite ones are. */
const hugeLoss = 1e12;

interface MetricLine {
  /** The loss as printed; NaN or ±Infinity where it printed nan or inf. */
  loss: number;
  step?: number;
  epoch?: number;
}

const value = String.raw`(-?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|[-+]?(?:nan|inf(?:inity)?))`;
const lossPattern = new RegExp(String.raw`(?<![\w/])(?:train/)?loss['"]?\s*[:=]?\s*(?:tensor\()?` + value, 'i');
const stepPattern = /(?<!\w)['"]?(?:global_step|step|iteration|iter)['"]?\s*[:=]?\s*(\d+)/i;
const epochPattern = new RegExp(String.raw`(?<!\w)['"]?epoch['"]?\s*[:=]?\s*` + value, 'i');

const number = (text: string) => {
  const lower = text.toLowerCase().replace(/^\+/, '');
  if (lower === 'nan' || lower === '-nan') return Number.NaN;
  if (lower.endsWith('inf') || lower.endsWith('infinity')) return lower.startsWith('-') ? -Infinity : Infinity;
  return Number(text);
};

/** The loss (with its step and epoch where the line gives them) of one log line; undefined for a line without one. */
export function parseMetricLine(line: string): MetricLine | undefined {
  const loss = lossPattern.exec(line);
  if (!loss) return undefined;
  const step = stepPattern.exec(line);
  const epoch = epochPattern.exec(line);
  return {
    loss: number(loss[1]!),
    ...(step ? { step: Number(step[1]) } : {}),
    ...(epoch && Number.isFinite(number(epoch[1]!)) ? { epoch: number(epoch[1]!) } : {}),
  };
}

/**
 * A log's loss curve, read in pieces as the log grows (a live tail feeds each piece it reads, whole lines only).
 * Lines without a step (the Trainer's dicts) are numbered in order; their restarts show as the epoch going back.
 */
export class LossCurve {
  /** Times the step counter went back. */
  restarts = 0;
  /** Losses left out: nan, inf, or above {@link hugeLoss}. */
  dropped = 0;
  private lastStep: number | undefined;
  private lastEpoch: number | undefined;
  private lastX: number | undefined;
  /** Added to a segment's steps so it starts after the previous one ends. */
  private offset = 0;

  /** The chart points of these lines. */
  add(text: string): CurvePoint[] {
    const points: CurvePoint[] = [];
    for (const line of text.split('\n')) {
      const metric = parseMetricLine(line);
      if (!metric) continue;
      const step =
        metric.step ??
        (metric.epoch !== undefined && this.lastEpoch !== undefined && metric.epoch < this.lastEpoch ? 0 : (this.lastStep ?? 0) + 1);
      const nextEpoch =
        metric.step !== undefined && metric.epoch !== undefined && this.lastEpoch !== undefined && metric.epoch > this.lastEpoch;
      if (this.lastStep !== undefined && step <= this.lastStep && nextEpoch) {
        // Steps counted within each epoch (`epoch 2 step 1 loss …`): the line goes on, no restart.
        this.offset = this.lastX! + 1 - step;
      } else if (this.lastStep !== undefined && step === this.lastStep) continue;
      else if (this.lastStep !== undefined && step < this.lastStep) {
        this.restarts++;
        this.offset = this.lastX! + 1 - step;
        points.push([this.lastX! + 0.5, null]);
      }
      this.lastStep = step;
      if (metric.epoch !== undefined) this.lastEpoch = metric.epoch;
      const x = step + this.offset;
      this.lastX = x;
      if (!Number.isFinite(metric.loss) || Math.abs(metric.loss) > hugeLoss) {
        this.dropped++;
        continue;
      }
      points.push([x, metric.loss]);
    }
    return points;
  }
}

/** A log's loss curve, with its restarts and the values left out. */
export interface LossSeries {
  points: CurvePoint[];
  restarts: number;
  dropped: number;
}

/** The loss curve of a whole log. */
export function lossCurve(text: string): LossSeries {
  const curve = new LossCurve();
  const points = curve.add(text);
  return { points, restarts: curve.restarts, dropped: curve.dropped };
}

/** What a chart of the series does not show by itself, a phrase each: its restarts and the values left out (the report's and the view's). */
export function curveNotes(series: LossSeries): string[] {
  const count = (n: number, what: string) => `${n} ${what}${n > 1 ? 's' : ''}`;
  return [
    ...(series.restarts > 0 ? [`${count(series.restarts, 'restart')}: each new segment placed after the last, with a gap`] : []),
    ...(series.dropped > 0 ? [`${count(series.dropped, 'nan, inf or huge loss value')} left out`] : []),
  ];
}

/** At most about `max` points of a curve, for a static chart or a summary file: every k-th, its gaps and last point kept. */
export function thinned(series: LossSeries, max: number): LossSeries {
  const every = Math.ceil(series.points.length / max);
  if (every <= 1) return series;
  const last = series.points.length - 1;
  return { ...series, points: series.points.filter(([, loss], i) => loss === null || i % every === 0 || i === last) };
}
