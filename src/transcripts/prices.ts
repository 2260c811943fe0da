import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { A2rlError } from '../util/errors.js';
import type { TokenUsage } from './types.js';

/** A model's list prices in US dollars per million tokens; cached and cache-write tokens at the input price when not given. */
export interface ModelPrice {
  input: number;
  output: number;
  cached_input?: number;
  cache_write_input?: number;
}

/** Prices as of a date, from a source, by model name (`runs.driver_model`, or the model the transcript names). */
export interface PriceTable {
  date: string;
  source: string;
  models: Record<string, ModelPrice>;
}

/**
 * The prices a2rl ships, for CLIs that report tokens but no dollars (Codex, Gemini CLI) and for a Claude Code run whose
 * model Claude Code could not price. Short-context tiers only (Gemini charges more past 200k-token prompts). Prices
 * change: an operator passes their own with `--prices FILE` (docs/operating.md, "Tokens and cost").
 */
export const shippedPrices: PriceTable = {
  date: '2025-10-01',
  source: "the providers' published list prices (Anthropic's as Claude Code 2.1.332 prices them)",
  models: {
    'claude-opus-4-1': { input: 15, output: 75, cached_input: 1.5, cache_write_input: 18.75 },
    'claude-sonnet-4-5': { input: 3, output: 15, cached_input: 0.3, cache_write_input: 3.75 },
    'claude-haiku-4-5': { input: 1, output: 5, cached_input: 0.1, cache_write_input: 1.25 },
    'gpt-5': { input: 1.25, output: 10, cached_input: 0.125 },
    'gpt-5-codex': { input: 1.25, output: 10, cached_input: 0.125 },
    'gpt-5-mini': { input: 0.25, output: 2, cached_input: 0.025 },
    'gpt-5-nano': { input: 0.05, output: 0.4, cached_input: 0.005 },
    'gemini-2.5-pro': { input: 1.25, output: 10, cached_input: 0.31 },
    'gemini-2.5-flash': { input: 0.3, output: 2.5, cached_input: 0.075 },
    'gemini-2.5-flash-lite': { input: 0.1, output: 0.4, cached_input: 0.025 },
  },
};

const perMillion = z.number().nonnegative().finite();
const priceFileSchema = z
  .object({
    date: z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'a date, YYYY-MM-DD: when these prices were read'),
    source: z.string().min(1).optional(),
    models: z.record(
      z.string().min(1),
      z
        .object({ input: perMillion, output: perMillion, cached_input: perMillion.optional(), cache_write_input: perMillion.optional() })
        .strict(),
    ),
  })
  .strict();

/** An operator's price table (`--prices FILE`): JSON `{date, source?, models: {NAME: {input, output, cached_input?, cache_write_input?}}}`, USD per million tokens. */
export function loadPriceTable(file: string): PriceTable {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new A2rlError(
      'INVALID_INPUT',
      `--prices ${file} is not a readable JSON file (${(error as Error).message}); see docs/operating.md, "Tokens and cost".`,
    );
  }
  const parsed = priceFileSchema.safeParse(json);
  if (!parsed.success) {
    throw new A2rlError(
      'INVALID_INPUT',
      `--prices ${file} is not a price table: ${z.prettifyError(parsed.error)}. See docs/operating.md, "Tokens and cost".`,
    );
  }
  return { date: parsed.data.date, source: parsed.data.source ?? file, models: parsed.data.models };
}

/** The price tables to look a model up in, the operator's before the shipped one. */
export const priceTables = (operator?: PriceTable): PriceTable[] => (operator ? [operator, shippedPrices] : [shippedPrices]);

/**
 * A model's price: its own entry in the first table that has one, else the longest entry it extends by a dated or
 * other suffix (`claude-sonnet-4-5-20250929` is priced as `claude-sonnet-4-5`; `gpt-5-mini` is never priced as `gpt-5`
 * while a table has `gpt-5-mini`).
 */
export function findPrice(tables: readonly PriceTable[], model: string): { price: ModelPrice; table: PriceTable } | undefined {
  const exact = tables.find((table) => Object.hasOwn(table.models, model));
  if (exact) return { price: exact.models[model]!, table: exact };
  for (const table of tables) {
    const name = Object.keys(table.models)
      .filter((name) => model.startsWith(`${name}-`))
      .sort((a, b) => b.length - a.length)[0];
    if (name) return { price: table.models[name]!, table };
  }
  return undefined;
}

/**
 * The usage with its dollars: the agent's own figure when it reported one, else its tokens priced from the tables
 * (`costSource: 'price-table'`); without a price for the model, or without the token counts a price needs, no dollars.
 */
export function pricedUsage(
  usage: TokenUsage,
  model: string | undefined,
  tables: readonly PriceTable[],
): TokenUsage & { priceTable?: string } {
  if (usage.costUsd !== undefined || !model || usage.inputTokens === undefined || usage.outputTokens === undefined) return usage;
  const found = findPrice(tables, model);
  if (!found) return usage;
  const { price, table } = found;
  const cached = usage.cachedInputTokens ?? 0;
  const written = usage.cacheWriteInputTokens ?? 0;
  const dollars =
    (usage.inputTokens - cached - written) * price.input +
    cached * (price.cached_input ?? price.input) +
    written * (price.cache_write_input ?? price.input) +
    usage.outputTokens * price.output;
  return { ...usage, costUsd: dollars / 1e6, costSource: 'price-table', priceTable: `${table.date} (${table.source})` };
}

/** Decimals every dollar figure shows: the report, the leaderboard (CLI and view), the suite report and the export. */
const usdDecimals = 4;

/**
 * A dollar figure rounded to {@link usdDecimals}, half away from zero on its decimal value: `toFixed` alone rounds the
 * binary fraction (0.00405 → "0.0040") while scaling by 10⁴ first rounds up ("0.0041"), so the same run read differently.
 */
export function roundUsd(usd: number): number {
  const scale = 10 ** usdDecimals;
  // toPrecision(12) drops the binary noise of the product (0.00405 × 10⁴ = 40.49999…) before rounding.
  const scaled = Number((Math.abs(usd) * scale).toPrecision(12));
  return (Math.sign(usd) * Math.round(scaled)) / scale;
}

/** A dollar figure as every table shows it, without the "$": "0.0041". */
export const formatUsd = (usd: number): string => roundUsd(usd).toFixed(usdDecimals);
