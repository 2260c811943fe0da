/**
 * L1-regularised logistic regression exactly as scikit-learn's `liblinear` solver fits it
 * (scikit-learn 1.9's copy of LIBLINEAR: `train` → `train_one` → `solve_l1r_lr`, the newGLMNET
 * method of Yuan et al. 2011, no intercept), for the AlpacaEval length-controlled win rate.
 *
 * Why a port and not any exact solver: liblinear stops at a relative tolerance (1e-4 in
 * scikit-learn's defaults), so its coefficients differ from the true optimum by about 1e-4,
 * which moves a win rate by ~1e-3 points. Reproducing alpaca_eval's figures to 1e-6 therefore
 * needs the same iterations, the same stopping tests and the same pseudo-random coordinate
 * order (scikit-learn's mt19937 with Lemire's bounded draw, reseeded for every fit).
 */

/** One training instance: features, class (0 or 1) and instance weight (liblinear's C_i = C·weight). */
export interface WeightedInstance {
  features: readonly number[];
  label: 0 | 1;
  weight: number;
}

/** std::mt19937 (32-bit), as scikit-learn's liblinear draws from it. */
class MersenneTwister {
  private readonly state = new Uint32Array(624);
  private position = 624;

  constructor(seed: number) {
    this.state[0] = seed >>> 0;
    for (let i = 1; i < 624; i++) {
      const previous = this.state[i - 1]! ^ (this.state[i - 1]! >>> 30);
      this.state[i] = (Math.imul(1812433253, previous) + i) >>> 0;
    }
  }

  next(): number {
    if (this.position >= 624) this.twist();
    let y = this.state[this.position++]!;
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  private twist(): void {
    for (let i = 0; i < 624; i++) {
      const y = (this.state[i]! & 0x80000000) | (this.state[(i + 1) % 624]! & 0x7fffffff);
      let value = this.state[(i + 397) % 624]! ^ (y >>> 1);
      if (y & 1) value ^= 0x9908b0df;
      this.state[i] = value >>> 0;
    }
    this.position = 0;
  }

  /**
   * scikit-learn's `bounded_rand_int`: Lemire's multiply-shift with rejection. The 64-bit product
   * is exact in a double because `range` here is a feature count, far below 2^21.
   */
  boundedInt(range: number): number {
    const two32 = 2 ** 32;
    let product = this.next() * range;
    let low = product % two32;
    if (low < range) {
      let threshold = two32 - range;
      if (threshold >= range) {
        threshold -= range;
        if (threshold >= range) threshold %= range;
      }
      while (low < threshold) {
        product = this.next() * range;
        low = product % two32;
      }
    }
    return Math.floor(product / two32);
  }
}

/**
 * The seeds scikit-learn hands liblinear for `random_state=123` (alpaca_eval's setting): the
 * successive draws of `np.random.RandomState(123).randint(np.iinfo("i").max)`. A regularisation
 * path makes one RandomState and draws once per C, so the k-th C of the grid is fitted with the
 * k-th seed, in every fold; the final refit, a path of one C, gets the first.
 */
export const ALPACA_EVAL_LIBLINEAR_SEEDS = [
  843828734, 914636141, 1228959102, 1840268610, 974319580, 819844194, 220395238, 941243409, 942612051, 2109339754,
] as const;

const TOLERANCE = 1e-4; // LogisticRegressionCV's tol
const NEWTON_ITERATIONS_MAX = 100; // LogisticRegressionCV's max_iter
const QP_ITERATIONS_MAX = 1000;
const LINE_SEARCHES_MAX = 20;

/**
 * Fits min_w ‖w‖₁ + C·Σ weight_i·log(1 + exp(−y_i·wᵀx_i)) with liblinear's algorithm, liblinear's
 * tolerance (1e-4·max(min(#pos, #neg), 1)/#instances) and its handling of the data:
 * zero-weight instances dropped, class 0 before class 1, zero feature values skipped.
 */
export function fitL1LogisticRegressionLikeLiblinear(
  instances: readonly WeightedInstance[],
  C: number,
  featureCount: number,
  seed: number,
): number[] {
  const kept = instances.filter((instance) => instance.weight > 0);
  const negatives = kept.filter((instance) => instance.label === 0);
  const positives = kept.filter((instance) => instance.label === 1);
  // liblinear trains class 1 against class 0; with one class left it trains that class against
  // nothing, i.e. every instance is positive, and scikit-learn reads the result as class 1's.
  const ordered = [...negatives, ...positives];
  const sign = ordered.map((instance) => (negatives.length > 0 && positives.length > 0 && instance.label === 0 ? -1 : 1));
  const l = ordered.length;
  if (l === 0) throw new Error('liblinear: no instance has a positive weight');
  const positiveCount = sign.filter((s) => s > 0).length;
  const eps = (TOLERANCE * Math.max(Math.min(positiveCount, l - positiveCount), 1)) / l;

  // Column-major, nonzeros only, as liblinear's transpose() builds it.
  const columns = Array.from({ length: featureCount }, (_, j) => {
    const rows: number[] = [];
    const values: number[] = [];
    ordered.forEach((instance, i) => {
      const value = instance.features[j]!;
      if (value !== 0) {
        rows.push(i);
        values.push(value);
      }
    });
    return { rows, values };
  });
  const instanceC = ordered.map((instance) => instance.weight * C);
  return solveL1RegularisedLogistic(columns, sign, instanceC, eps, new MersenneTwister(seed));
}

/** liblinear's `solve_l1r_lr`, statement for statement (its variable names kept for comparison). */
function solveL1RegularisedLogistic(
  columns: ReadonlyArray<{ rows: number[]; values: number[] }>,
  y: readonly number[],
  C: readonly number[],
  eps: number,
  random: MersenneTwister,
): number[] {
  const l = y.length;
  const wSize = columns.length;
  const nu = 1e-12;
  const sigma = 0.01;
  let innerEps = 1;
  let newtonIter = 0;
  let iter = 0;
  let QPNoChange = 0;
  let Gnorm1Init = -1;
  let GmaxOld = Infinity;

  const w = new Array<number>(wSize).fill(0);
  const wpd = new Array<number>(wSize).fill(0);
  const index = Array.from({ length: wSize }, (_, j) => j);
  const Hdiag = new Array<number>(wSize).fill(0);
  const Grad = new Array<number>(wSize).fill(0);
  const xjnegSum = new Array<number>(wSize).fill(0);
  const xTd = new Array<number>(l).fill(0);
  const expWTx = new Array<number>(l).fill(0);
  const expWTxNew = new Array<number>(l).fill(0);
  const tau = new Array<number>(l).fill(0);
  const D = new Array<number>(l).fill(0);

  let wNorm = 0;
  for (let j = 0; j < wSize; j++) {
    const { rows, values } = columns[j]!;
    for (let k = 0; k < rows.length; k++) {
      const ind = rows[k]!;
      expWTx[ind]! += w[j]! * values[k]!;
      if (y[ind] === -1) xjnegSum[j]! += C[ind]! * values[k]!;
    }
  }
  const refreshCurvature = () => {
    for (let i = 0; i < l; i++) {
      const tauTmp = 1 / (1 + expWTx[i]!);
      tau[i] = C[i]! * tauTmp;
      D[i] = C[i]! * expWTx[i]! * tauTmp * tauTmp;
    }
  };
  for (let i = 0; i < l; i++) expWTx[i] = Math.exp(expWTx[i]!);
  refreshCurvature();

  while (newtonIter < NEWTON_ITERATIONS_MAX) {
    let GmaxNew = 0;
    let Gnorm1New = 0;
    let activeSize = wSize;

    for (let s = 0; s < activeSize; s++) {
      const j = index[s]!;
      const { rows, values } = columns[j]!;
      Hdiag[j] = nu;
      let tmp = 0;
      for (let k = 0; k < rows.length; k++) {
        const ind = rows[k]!;
        Hdiag[j]! += values[k]! * values[k]! * D[ind]!;
        tmp += values[k]! * tau[ind]!;
      }
      Grad[j] = -tmp + xjnegSum[j]!;

      const Gp = Grad[j]! + 1;
      const Gn = Grad[j]! - 1;
      let violation = 0;
      if (w[j] === 0) {
        if (Gp < 0) violation = -Gp;
        else if (Gn > 0) violation = Gn;
        else if (Gp > GmaxOld / l && Gn < -GmaxOld / l) {
          // outer-level shrinking
          activeSize--;
          [index[s], index[activeSize]] = [index[activeSize]!, index[s]!];
          s--;
          continue;
        }
      } else if (w[j]! > 0) violation = Math.abs(Gp);
      else violation = Math.abs(Gn);

      GmaxNew = Math.max(GmaxNew, violation);
      Gnorm1New += violation;
    }

    if (newtonIter === 0) Gnorm1Init = Gnorm1New;
    if (Gnorm1New <= eps * Gnorm1Init || QPNoChange >= 10) break;

    QPNoChange++;
    iter = 0;
    let QPGmaxOld = Infinity;
    let QPActiveSize = activeSize;
    xTd.fill(0);

    // Coordinate descent on the quadratic model, over wpd.
    while (iter < QP_ITERATIONS_MAX) {
      let QPGmaxNew = 0;
      let QPGnorm1New = 0;

      for (let j = 0; j < QPActiveSize; j++) {
        const i = j + random.boundedInt(QPActiveSize - j);
        [index[i], index[j]] = [index[j]!, index[i]!];
      }

      for (let s = 0; s < QPActiveSize; s++) {
        const j = index[s]!;
        const H = Hdiag[j]!;
        const { rows, values } = columns[j]!;
        let G = Grad[j]! + (wpd[j]! - w[j]!) * nu;
        for (let k = 0; k < rows.length; k++) {
          const ind = rows[k]!;
          G += values[k]! * D[ind]! * xTd[ind]!;
        }

        const Gp = G + 1;
        const Gn = G - 1;
        let violation = 0;
        if (wpd[j] === 0) {
          if (Gp < 0) violation = -Gp;
          else if (Gn > 0) violation = Gn;
          else if (Gp > QPGmaxOld / l && Gn < -QPGmaxOld / l) {
            // inner-level shrinking
            QPActiveSize--;
            [index[s], index[QPActiveSize]] = [index[QPActiveSize]!, index[s]!];
            s--;
            continue;
          }
        } else if (wpd[j]! > 0) violation = Math.abs(Gp);
        else violation = Math.abs(Gn);

        let z: number;
        if (Gp < H * wpd[j]!) z = -Gp / H;
        else if (Gn > H * wpd[j]!) z = -Gn / H;
        else z = -wpd[j]!;

        if (Math.abs(z) < 1.0e-12) continue;
        z = Math.min(Math.max(z, -10.0), 10.0);

        QPNoChange = 0;
        QPGmaxNew = Math.max(QPGmaxNew, violation);
        QPGnorm1New += violation;

        wpd[j]! += z;
        for (let k = 0; k < rows.length; k++) xTd[rows[k]!]! += values[k]! * z;
      }

      iter++;

      if (QPGnorm1New <= innerEps * Gnorm1Init) {
        if (QPActiveSize === activeSize) break; // inner stopping
        QPActiveSize = activeSize; // active set reactivation
        QPGmaxOld = Infinity;
        continue;
      }
      QPGmaxOld = QPGmaxNew;
    }

    let delta = 0;
    let wNormNew = 0;
    for (let j = 0; j < wSize; j++) {
      delta += Grad[j]! * (wpd[j]! - w[j]!);
      if (wpd[j] !== 0) wNormNew += Math.abs(wpd[j]!);
    }
    delta += wNormNew - wNorm;

    let negsumXTd = 0;
    for (let i = 0; i < l; i++) if (y[i] === -1) negsumXTd += C[i]! * xTd[i]!;

    let lineSearches: number;
    for (lineSearches = 0; lineSearches < LINE_SEARCHES_MAX; lineSearches++) {
      let cond = wNormNew - wNorm + negsumXTd - sigma * delta;
      for (let i = 0; i < l; i++) {
        const expXTd = Math.exp(xTd[i]!);
        expWTxNew[i] = expWTx[i]! * expXTd;
        cond += C[i]! * Math.log((1 + expWTxNew[i]!) / (expXTd + expWTxNew[i]!));
      }

      if (cond <= 0) {
        wNorm = wNormNew;
        for (let j = 0; j < wSize; j++) w[j] = wpd[j]!;
        for (let i = 0; i < l; i++) expWTx[i] = expWTxNew[i]!;
        refreshCurvature();
        break;
      }
      wNormNew = 0;
      for (let j = 0; j < wSize; j++) {
        wpd[j] = (w[j]! + wpd[j]!) * 0.5;
        if (wpd[j] !== 0) wNormNew += Math.abs(wpd[j]!);
      }
      delta *= 0.5;
      negsumXTd *= 0.5;
      for (let i = 0; i < l; i++) xTd[i]! *= 0.5;
    }

    // Too many line-search steps: recompute exp(wᵀx) from w (liblinear leaves tau and D as they are).
    if (lineSearches >= LINE_SEARCHES_MAX) {
      expWTx.fill(0);
      for (let j = 0; j < wSize; j++) {
        if (w[j] === 0) continue;
        const { rows, values } = columns[j]!;
        for (let k = 0; k < rows.length; k++) expWTx[rows[k]!]! += w[j]! * values[k]!;
      }
      for (let i = 0; i < l; i++) expWTx[i] = Math.exp(expWTx[i]!);
    }

    if (iter === 1) innerEps *= 0.25;
    newtonIter++;
    GmaxOld = GmaxNew;
  }
  return w;
}
