/**
 * A token bucket: `ratePerSecond` sustained, up to `burst` at once after a quiet spell.
 */
export class TokenBucket {
  private tokens: number;
  private at: number;

  constructor(
    readonly ratePerSecond: number,
    readonly burst: number,
    now = Date.now(),
  ) {
    this.tokens = burst;
    this.at = now;
  }

  /** Takes a token: returns 0 when one was free, else the milliseconds until one will be (nothing taken). */
  take(now = Date.now()): number {
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) * this.ratePerSecond) / 1000);
    this.at = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - this.tokens) * 1000) / this.ratePerSecond);
  }
}
