import { describe, expect, it } from 'vitest';
import { curveNotes, LossCurve, lossCurve, parseMetricLine, thinned } from '../src/reports/metrics.js';

describe('the loss curve of a training log', () => {
  it('reads key=value lines as the micro training loop and others print them', () => {
    const log = ['loading data', 'step 10/800 loss 0.90 lr 1e-3', 'step=20 loss=0.75', 'Step: 30, loss: 6.5e-1', 'saved at step 30'].join(
      '\n',
    );
    expect(lossCurve(log)).toEqual({
      points: [
        [10, 0.9],
        [20, 0.75],
        [30, 0.65],
      ],
      restarts: 0,
      dropped: 0,
    });
  });

  it('reads Hugging Face Trainer dicts (a Python repr) in order, leaving out eval_loss and the closing train_loss', () => {
    const log = [
      "{'loss': 0.52, 'grad_norm': 1.25, 'learning_rate': 5e-05, 'epoch': 0.1}",
      "{'eval_loss': 0.61, 'eval_runtime': 1.2, 'epoch': 0.1}",
      "{'loss': 0.48, 'grad_norm': 1.1, 'learning_rate': 4e-05, 'epoch': 0.2}",
      "{'train_runtime': 12.3, 'train_loss': 0.5, 'epoch': 0.2}",
    ].join('\n');
    expect(lossCurve(log).points).toEqual([
      [1, 0.52],
      [2, 0.48],
    ]);
  });

  it('reads JSON lines, with train/loss as loss', () => {
    const log = ['{"step": 3, "loss": 0.5}', '{"global_step": 6, "train/loss": 0.25, "lr": 0.001}', '{"step": 9, "val_loss": 0.7}'].join(
      '\n',
    );
    expect(lossCurve(log).points).toEqual([
      [3, 0.5],
      [6, 0.25],
    ]);
  });

  it('starts a new segment after a restart, never drawing back over the old one', () => {
    const { points, restarts } = lossCurve(['step 100 loss 1.0', 'step 200 loss 0.8', 'step 0 loss 1.1', 'step 100 loss 0.9'].join('\n'));
    expect(restarts).toBe(1);
    expect(points).toEqual([
      [100, 1.0],
      [200, 0.8],
      [200.5, null],
      [201, 1.1],
      [301, 0.9],
    ]);
    const xs = points.map(([x]) => x);
    expect(xs).toEqual([...xs].sort((a, b) => a - b));
  });

  it('continues the line where steps are counted within each epoch, and still sees a restart within one', () => {
    const log = [
      'epoch 1 step 1 loss 1.0',
      'epoch 1 step 2 loss 0.9',
      'epoch 2 step 1 loss 0.8',
      'epoch 2 step 2 loss 0.7',
      'epoch 2 step 1 loss 0.75',
    ];
    expect(lossCurve(log.join('\n'))).toEqual({
      points: [
        [1, 1.0],
        [2, 0.9],
        [3, 0.8],
        [4, 0.7],
        [4.5, null],
        [5, 0.75],
      ],
      restarts: 1,
      dropped: 0,
    });
  });

  it("sees a restart of the Trainer's dicts in the epoch going back", () => {
    const log = ["{'loss': 0.5, 'epoch': 0.5}", "{'loss': 0.4, 'epoch': 1.0}", "{'loss': 0.6, 'epoch': 0.5}"].join('\n');
    expect(lossCurve(log)).toEqual({
      points: [
        [1, 0.5],
        [2, 0.4],
        [2.5, null],
        [3, 0.6],
      ],
      restarts: 1,
      dropped: 0,
    });
  });

  it('leaves out and counts nan, inf and huge values, so the scale stays that of the real losses', () => {
    const log = [
      'step 1 loss 0.7',
      'step 2 loss nan',
      'step 3 loss=inf',
      '{"step": 4, "loss": 1e308}',
      "{'loss': -Infinity, 'step': 5}",
      'step 6 loss 0.6',
    ].join('\n');
    const { points, dropped } = lossCurve(log);
    expect(dropped).toBe(4);
    expect(points).toEqual([
      [1, 0.7],
      [6, 0.6],
    ]);
    expect(parseMetricLine('step 2 loss NaN')?.loss).toBeNaN();
  });

  it("says what the chart does not show, in one wording for the report's and the view's", () => {
    expect(curveNotes(lossCurve('step 1 loss 0.7\nstep 2 loss 0.6'))).toEqual([]);
    expect(curveNotes(lossCurve('step 2 loss 0.7\nstep 1 loss nan'))).toEqual([
      '1 restart: each new segment placed after the last, with a gap',
      '1 nan, inf or huge loss value left out',
    ]);
    expect(curveNotes({ points: [], restarts: 2, dropped: 3 })).toEqual([
      '2 restarts: each new segment placed after the last, with a gap',
      '3 nan, inf or huge loss values left out',
    ]);
  });

  it('thins a long curve for a static chart, keeping its gaps and its last point', () => {
    const log = Array.from({ length: 1000 }, (_, i) => `step ${i % 600} loss ${1 / (i + 1)}`).join('\n');
    const whole = lossCurve(log);
    const thin = thinned(whole, 100);
    expect(thin.points.length).toBeLessThanOrEqual(102);
    expect(thin.points.filter(([, loss]) => loss === null)).toHaveLength(1);
    expect(thin.points.at(-1)).toEqual(whole.points.at(-1));
  });

  it('keeps its place across pieces of a growing log, as a live tail reads it', () => {
    const curve = new LossCurve();
    expect(curve.add('step 1 loss 0.9\nstep 2 loss 0.8\n')).toEqual([
      [1, 0.9],
      [2, 0.8],
    ]);
    expect(curve.add('step 0 loss 1.0\n')).toEqual([
      [2.5, null],
      [3, 1.0],
    ]);
    expect(curve.restarts).toBe(1);
  });
});
