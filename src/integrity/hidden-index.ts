import type { HiddenItem, ItemSet } from './hidden-items.js';
import { sameTokens, tokenise, type TokenRun, windowKey } from './tokens.js';

/**
 * How texts are compared. `n`: the n-gram length (13, as GPT-3's and Llama 2's decontamination: long enough that a
 * shared 13-gram of ordinary prose is rare, short enough to survive a changed word elsewhere). A text shorter than n
 * but at least `minTokens` long is looked for whole. A text shorter than 2n must be found whole, in one place: the
 * micro tasks' items are short and templated, so items share many of their 13-grams, and one shared n-gram would
 * name every item of a template. `window`: how many tokens after a matched question its final answer may come, and
 * how close a level-3 game's spec values must be to its seed.
 */
export interface MatchSettings {
  n: number;
  minTokens: number;
  window: number;
}

/** One n-gram (or a whole short text) of a hidden item's text: found when the scanned tokens equal it. */
interface Window {
  text: number;
  /** Its first token in the text. */
  from: number;
  length: number;
  /** Found in the task's public material (its training data, brief, libraries): never evidence. */
  public: boolean;
}

interface ItemText {
  item: number;
  field: string;
  tokens: TokenRun;
  windows: Window[];
  /** How many of its windows, in one place, make a match: all of a text shorter than 2n or marked whole, else one. */
  required: number;
}

interface ItemRecord {
  item: number;
  companions: TokenRun[];
  public: boolean;
}

/**
 * Where a match was found: a file of the workspace, a code snapshot's or a submission's (an archive's member after
 * a colon: `data.zip:train.jsonl`), a write_file call, an exec or run_training command line.
 */
export interface SourceRef {
  kind: 'workspace' | 'code_snapshot' | 'submission' | 'write_file' | 'command';
  path: string;
}

/** One piece of evidence: an item of the hidden set found in a source, with where. */
export interface Evidence {
  item: string;
  /** The item's half of the evaluation set, or `decoy`. */
  half: ItemSet;
  /** Which part of the item: question, prompt+canonical_solution, instruction, reference, game (seed and spec)… */
  field: string;
  source: SourceRef;
  /** UTF-16 character offsets in the source's text, and the line the match starts on (1-based). */
  start: number;
  end: number;
  line: number;
  /** In a table read row by row (Parquet): the row (0-based, as `datasets` and pandas number them) and the column the match starts in. */
  row?: number;
  column?: string;
  excerpt: string;
  /** The item's final answer was found right after its question (GSM8K): question and answer together. */
  with_answer?: boolean;
}

const maxEvidencePerItem = 5;
const maxExcerpt = 300;

/**
 * A task's hidden items, indexed for scanning: every window of every text by the key of its first `minTokens`
 * tokens, and every game's seed. Built once per check; `markPublic` removes what the task's public material holds.
 */
export class HiddenIndex {
  readonly texts: ItemText[] = [];
  private readonly records: ItemRecord[] = [];
  private readonly byKey = new Map<number, Window[]>();
  private readonly byAnchor = new Map<number, ItemRecord[]>();
  private readonly answers = new Map<number, TokenRun>();

  constructor(
    readonly items: readonly HiddenItem[],
    readonly settings: MatchSettings,
  ) {
    const { n, minTokens } = settings;
    items.forEach((item, index) => {
      for (const { field, text, whole } of item.texts) {
        const tokens = tokenise(text);
        if (tokens.count < minTokens) continue;
        const textIndex = this.texts.length;
        const windows: Window[] = [];
        const length = Math.min(n, tokens.count);
        for (let from = 0; from + length <= tokens.count; from++) windows.push({ text: textIndex, from, length, public: false });
        this.texts.push({ item: index, field, tokens, windows, required: whole || tokens.count < 2 * n ? windows.length : 1 });
        for (const window of windows) {
          const key = windowKey(tokens, window.from, minTokens);
          const list = this.byKey.get(key);
          if (list) list.push(window);
          else this.byKey.set(key, [window]);
        }
      }
      if (item.answer !== undefined) this.answers.set(index, tokenise(item.answer));
      if (item.record) {
        const anchor = tokenise(item.record.anchor);
        if (anchor.count !== 1) return;
        const record = {
          item: index,
          companions: item.record.companions.map((c) => tokenise(c)).filter((c) => c.count > 0),
          public: false,
        };
        this.records.push(record);
        const key = windowKey(anchor, 0, 1);
        this.byAnchor.set(key, [...(this.byAnchor.get(key) ?? []), record]);
      }
    });
  }

  /** Marks every window and game found in a text of the task's public material as public: it is never evidence. */
  markPublic(text: string): void {
    const run = tokenise(text);
    this.eachWindowHit(run, (window) => (window.public = true));
    this.eachRecordHit(run, (record) => (record.public = true));
  }

  /** Items that can be found at all: a text of theirs at least minTokens long with a window not public, or a game not public. */
  matchable(): Set<number> {
    const found = new Set<number>();
    for (const text of this.texts) if (text.windows.some((w) => !w.public)) found.add(text.item);
    for (const record of this.records) if (!record.public) found.add(record.item);
    return found;
  }

  /** Calls `hit` for each window equal to the tokens at each position of `run`, with that position. */
  eachWindowHit(run: TokenRun, hit: (window: Window, at: number) => void): void {
    const k = this.settings.minTokens;
    for (let at = 0; at + k <= run.count; at++) {
      const candidates = this.byKey.get(windowKey(run, at, k));
      if (!candidates) continue;
      for (const window of candidates) {
        if (at + window.length <= run.count && sameTokens(run, at, this.texts[window.text]!.tokens, window.from, window.length))
          hit(window, at);
      }
    }
  }

  /** Calls `hit` for each game whose seed is at a position of `run` with all its spec values within `window` tokens. */
  eachRecordHit(run: TokenRun, hit: (record: ItemRecord, at: number, last: number) => void): void {
    if (this.byAnchor.size === 0) return;
    const near = this.settings.window;
    for (let at = 0; at < run.count; at++) {
      const records = this.byAnchor.get(windowKey(run, at, 1));
      if (!records) continue;
      for (const record of records) {
        let last = at;
        const found = record.companions.every((companion) => {
          for (let from = Math.max(0, at - near); from <= Math.min(run.count - companion.count, at + near); from++) {
            if (sameTokens(run, from, companion, 0, companion.count)) {
              last = Math.max(last, from + companion.count - 1);
              return true;
            }
          }
          return false;
        });
        if (found) hit(record, at, last);
      }
    }
  }

  /** Whether an item's final answer follows token `after` within `window` tokens. */
  answerFollows(item: number, run: TokenRun, after: number): boolean {
    const answer = this.answers.get(item);
    if (!answer || answer.count === 0) return false;
    for (let at = after + 1; at <= Math.min(run.count - answer.count, after + this.settings.window); at++) {
      if (sameTokens(run, at, answer, 0, answer.count)) return true;
    }
    return false;
  }
}

/** A text to scan, as a chunk of a larger source: where it starts in the source, and the line it starts on. */
export interface Chunk {
  text: string;
  /** Offset of text[0] in the source (UTF-16 units). */
  offset: number;
  /** The line text[0] is on (1-based). */
  line: number;
  /** A table's rows, one per line (src/integrity/parquet.ts): the column a position of `text` lies in. */
  columnAt?: (position: number) => string;
}

/**
 * The matches of one run, accumulated over all its sources: for each item, whether it was found and the evidence
 * (at most five places each). Chunks of one source may overlap (a source read in blocks repeats the end of the last
 * block), so a match is counted once per place.
 */
export class ContaminationScan {
  readonly found = new Map<number, Evidence[]>();
  private readonly seenPlaces = new Set<string>();

  constructor(readonly index: HiddenIndex) {}

  scan(source: SourceRef, chunk: Chunk): void {
    const run = tokenise(chunk.text);
    let newlines: number[] | undefined;
    const lineAt = (position: number) => {
      if (!newlines) {
        newlines = [];
        for (let i = chunk.text.indexOf('\n'); i !== -1; i = chunk.text.indexOf('\n', i + 1)) newlines.push(i);
      }
      let low = 0;
      let high = newlines.length;
      while (low < high) {
        const middle = (low + high) >> 1;
        if (newlines[middle]! < position) low = middle + 1;
        else high = middle;
      }
      return chunk.line + low;
    };
    const sourceKey = `${source.kind}\0${source.path}`;
    const evidence = (item: number, field: string, first: number, last: number, withAnswer: boolean) => {
      const start = run.start[first]!;
      const place = `${sourceKey}\0${item}\0${chunk.offset + start}`;
      if (this.seenPlaces.has(place)) return;
      const list = this.found.get(item) ?? [];
      this.found.set(item, list);
      const end = run.end[last]!;
      const previous = list.at(-1);
      // Consecutive n-grams of one long text in one place are one piece of evidence.
      if (
        previous &&
        previous.source.kind === source.kind &&
        previous.source.path === source.path &&
        previous.field === field &&
        chunk.offset + start <= previous.end
      ) {
        this.seenPlaces.add(place);
        previous.end = Math.max(previous.end, chunk.offset + end);
        previous.with_answer ||= withAnswer || undefined;
        return;
      }
      if (list.length >= maxEvidencePerItem) return;
      this.seenPlaces.add(place);
      const hiddenItem = this.index.items[item]!;
      list.push({
        item: hiddenItem.id,
        half: hiddenItem.half,
        field,
        source,
        start: chunk.offset + start,
        end: chunk.offset + end,
        line: lineAt(start),
        ...(chunk.columnAt ? { row: lineAt(start) - 1, column: chunk.columnAt(start) } : {}),
        excerpt: chunk.text.slice(start, Math.min(end, start + maxExcerpt)),
        ...(withAnswer ? { with_answer: true } : {}),
      });
    };
    // Windows of texts found only whole, by text and the position of its first token (a chunk holds all of such a text).
    const aligned = new Map<string, Set<Window>>();
    this.index.eachWindowHit(run, (window, at) => {
      const text = this.index.texts[window.text]!;
      const startsAt = at - window.from;
      if (text.required === 1) {
        if (!window.public)
          evidence(text.item, text.field, at, at + window.length - 1, this.index.answerFollows(text.item, run, at + window.length - 1));
        return;
      }
      // Such a text counts only whole, in one place: all its windows aligned on the same first token, one not public.
      if (startsAt < 0 || text.windows.every((w) => w.public)) return;
      const key = `${window.text}:${startsAt}`;
      const hits = aligned.get(key) ?? new Set<Window>();
      aligned.set(key, hits);
      hits.add(window);
      if (hits.size === text.required) {
        const last = startsAt + text.tokens.count - 1;
        evidence(text.item, text.field, startsAt, last, this.index.answerFollows(text.item, run, last));
      }
    });
    this.index.eachRecordHit(run, (record, at, last) => {
      if (!record.public) evidence(record.item, 'game', at, last, false);
    });
  }
}
