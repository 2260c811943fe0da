/** Percentage of comparisons won against the references, ties counting half. */
export function winRate(outcomes: number[]): number {
  return outcomes.length === 0 ? 0 : (100 * outcomes.reduce((a, b) => a + b, 0)) / outcomes.length;
}

const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));

/**
 * Length-controlled win rate, after AlpacaEval 2.0: fit outcome ~ σ(a + b·tanh(Δlen / sd))
 * by logistic regression (outcomes as soft labels, a small ridge for stability) and report
 * the win rate predicted at equal length, 100·σ(a). A model that wins only by writing more
 * (or less) than the references is not rewarded for it.
 */
export function lengthControlledWinRate(outcomes: number[], candidateLengths: number[], referenceLengths: number[]): number {
  const n = outcomes.length;
  if (n === 0) return 0;
  const deltas = outcomes.map((_, i) => candidateLengths[i]! - referenceLengths[i]!);
  const mean = deltas.reduce((a, b) => a + b, 0) / n;
  const sd = Math.sqrt(deltas.reduce((a, d) => a + (d - mean) ** 2, 0) / n) || 1;
  const x = deltas.map((d) => Math.tanh(d / sd));
  const ridge = 1e-3;
  let a = 0;
  let b = 0;
  for (let iteration = 0; iteration < 50; iteration++) {
    // Newton step on the penalised log-likelihood.
    let ga = -ridge * a;
    let gb = -ridge * b;
    let haa = ridge;
    let hab = 0;
    let hbb = ridge;
    for (let i = 0; i < n; i++) {
      const p = sigmoid(a + b * x[i]!);
      const residual = outcomes[i]! - p;
      const w = Math.max(p * (1 - p), 1e-9);
      ga += residual;
      gb += residual * x[i]!;
      haa += w;
      hab += w * x[i]!;
      hbb += w * x[i]! * x[i]!;
    }
    const det = haa * hbb - hab * hab;
    if (Math.abs(det) < 1e-12) break;
    const stepA = (hbb * ga - hab * gb) / det;
    const stepB = (haa * gb - hab * ga) / det;
    a += stepA;
    b += stepB;
    if (Math.abs(stepA) + Math.abs(stepB) < 1e-10) break;
  }
  return 100 * sigmoid(a);
}
