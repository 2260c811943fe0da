import { createHash } from 'node:crypto';

const N = 624;
const M = 397;
const MATRIX_A = 0x9908b0df;
const UPPER_MASK = 0x80000000;
const LOWER_MASK = 0x7fffffff;

/**
 * CPython's `random.Random(seed)` for a str seed, as far as alpaca_eval uses it: the Mersenne Twister (MT19937)
 * seeded as CPython seeds it from a string (version 2: the UTF-8 bytes followed by their SHA-512 digest, read as one
 * big-endian integer, whose 32-bit words, least significant first, go to init_by_array), and `random()`, 53 bits from
 * two draws. alpaca_eval decides with it which order a judge sees two outputs in (`RandomSwitchTwoColumnsProcessor`);
 * matching it draw for draw makes the judge see what alpaca_eval's would.
 */
export class PythonRandom {
  private readonly state = new Uint32Array(N);
  private index = N + 1;

  constructor(seed: string) {
    const utf8 = Buffer.from(seed, 'utf8');
    const integer = Buffer.concat([utf8, createHash('sha512').update(utf8).digest()]);
    let first = 0;
    while (first < integer.length - 1 && integer[first] === 0) first++; // an integer has no leading zero bytes
    const bytes = integer.subarray(first);
    const key: number[] = [];
    for (let end = bytes.length; end > 0; end -= 4) {
      let word = 0;
      for (let k = Math.max(0, end - 4); k < end; k++) word = ((word << 8) | bytes[k]!) >>> 0;
      key.push(word);
    }
    this.initByArray(key);
  }

  /** A float in [0, 1), as CPython's random(): (a·2^26 + b) / 2^53 from two 32-bit draws shifted by 5 and 6. */
  random(): number {
    const a = this.next() >>> 5;
    const b = this.next() >>> 6;
    return (a * 67108864 + b) / 9007199254740992;
  }

  /** `choices(population, k=1)[0]` without weights: population[floor(random() · n)]. */
  choice<T>(population: readonly T[]): T {
    return population[Math.floor(this.random() * population.length)]!;
  }

  private initGenrand(seed: number): void {
    const mt = this.state;
    mt[0] = seed >>> 0;
    for (let i = 1; i < N; i++) {
      const previous = mt[i - 1]! ^ (mt[i - 1]! >>> 30);
      mt[i] = (Math.imul(1812433253, previous) + i) >>> 0;
    }
    this.index = N;
  }

  private initByArray(key: number[]): void {
    const mt = this.state;
    this.initGenrand(19650218);
    let i = 1;
    let j = 0;
    for (let k = Math.max(N, key.length); k > 0; k--) {
      const previous = mt[i - 1]! ^ (mt[i - 1]! >>> 30);
      mt[i] = ((mt[i]! ^ Math.imul(previous, 1664525)) + key[j]! + j) >>> 0;
      i++;
      j++;
      if (i >= N) {
        mt[0] = mt[N - 1]!;
        i = 1;
      }
      if (j >= key.length) j = 0;
    }
    for (let k = N - 1; k > 0; k--) {
      const previous = mt[i - 1]! ^ (mt[i - 1]! >>> 30);
      mt[i] = ((mt[i]! ^ Math.imul(previous, 1566083941)) - i) >>> 0;
      i++;
      if (i >= N) {
        mt[0] = mt[N - 1]!;
        i = 1;
      }
    }
    mt[0] = 0x80000000;
  }

  private next(): number {
    const mt = this.state;
    if (this.index >= N) {
      const twist = (k: number, next: number, far: number) => {
        const y = (mt[k]! & UPPER_MASK) | (mt[next]! & LOWER_MASK);
        mt[k] = (mt[far]! ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0)) >>> 0;
      };
      let k = 0;
      for (; k < N - M; k++) twist(k, k + 1, k + M);
      for (; k < N - 1; k++) twist(k, k + 1, k + M - N);
      twist(N - 1, 0, M - 1);
      this.index = 0;
    }
    let y = mt[this.index++]!;
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }
}
