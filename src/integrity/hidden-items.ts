import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { A2rlError } from '../util/errors.js';
import { lookup } from '../util/registry.js';

/** Which half of the hidden evaluation set an item is in. */
export type Half = 'public' | 'private';
export const halves: readonly Half[] = ['public', 'private'];
/**
 * Which set an item is in: a half of the hidden evaluation set, or the decoys (`<evalDir>/decoys.jsonl`): items the
 * task's generator drew like the evaluation items, hidden like them and never graded, looked for alike so that the
 * verdict can tell an agent that saw the evaluation set from one that drew from the same templates (verdict.ts).
 */
export type ItemSet = Half | 'decoy';

/**
 * One hidden evaluation item as the contamination check looks for it. `texts` are compared by long n-grams (a question,
 * a prompt with its canonical body, an instruction, a reference); `answer` is the final answer looked for just after a
 * matched text (GSM8K's number after ####); `record` is an item without long text (a level-3 game spec): its game id
 * (`anchor`, its seed) found with every other value of the spec (`companions`) close by.
 */
export interface HiddenItem {
  /** What names it in the evidence: its own id where the set has one (task_id, id, seed), else `<half>#<line>`. */
  id: string;
  half: ItemSet;
  /** `whole`: found only whole, in one place (a canonical body alone: its 13-grams are often ordinary code). */
  texts: Array<{ field: string; text: string; whole?: boolean }>;
  answer?: string;
  record?: { anchor: string; companions: string[] };
}

type Row = Record<string, unknown>;

/** How the rows of one kind of evaluation set become items: `fits` recognises the kind from a row's fields. */
interface ItemKind {
  fits(row: Row): boolean;
  item(row: Row, half: ItemSet, line: number): HiddenItem;
}

const text = (value: unknown): string | undefined => (typeof value === 'string' && value.trim() !== '' ? value : undefined);
const idOf = (row: Row, half: ItemSet, line: number): string => text(row.task_id) ?? text(row.id) ?? `${half}#${line}`;

/**
 * The kinds of hidden evaluation sets, by the name task.json's `integrity.items` may give (else recognised from the
 * first row). Each keeps both halves of an item the set pairs: question and final answer, prompt and canonical body,
 * instruction and reference, game id and spec.
 */
export const itemKinds: Readonly<Record<string, ItemKind>> = {
  // GSM8K: the question by n-grams, its final answer (after ####) looked for right after it.
  'question-answer': {
    fits: (row) => text(row.question) !== undefined && text(row.answer) !== undefined,
    item: (row, half, line) => ({
      id: idOf(row, half, line),
      half,
      texts: [{ field: 'question', text: text(row.question)! }],
      answer: /####\s*(.+)\s*$/.exec(String(row.answer))?.[1]?.trim(),
    }),
  },
  // HumanEval: the prompt, and the prompt followed by its canonical body (a body alone is often too short to be its own).
  program: {
    fits: (row) => text(row.prompt) !== undefined && text(row.canonical_solution) !== undefined,
    item: (row, half, line) => ({
      id: idOf(row, half, line),
      half,
      texts: [
        { field: 'prompt', text: text(row.prompt)! },
        { field: 'prompt+canonical_solution', text: `${String(row.prompt)}${String(row.canonical_solution)}` },
        { field: 'canonical_solution', text: text(row.canonical_solution)!, whole: true },
      ],
    }),
  },
  // AlpacaEval: the instruction and the reference output the judge compares against (micro: reference; full: output).
  'instruction-reference': {
    fits: (row) => text(row.instruction) !== undefined && (text(row.reference) ?? text(row.output)) !== undefined,
    item: (row, half, line) => ({
      id: idOf(row, half, line),
      half,
      texts: [
        { field: 'instruction', text: `${String(row.instruction)} ${text(row.input) ?? ''}` },
        { field: 'reference', text: (text(row.reference) ?? text(row.output))! },
      ],
    }),
  },
  // ALFWorld's games (full tier): a game is its name (task type, objects, room, trial), whole.
  'game-file': {
    fits: (row) => text(row.gamefile) !== undefined && text(row.name) !== undefined,
    item: (row, half, line) => ({
      id: text(row.name) ?? `${half}#${line}`,
      half,
      texts: [{ field: 'game', text: text(row.name)!, whole: true }],
    }),
  },
  // WebShop's goals (full tier): a goal is its instruction (the product's words, its options and price bound).
  'shopping-goal': {
    fits: (row) => text(row.instruction_text) !== undefined && text(row.asin) !== undefined,
    item: (row, half, line) => ({
      id: `${half}#${line}`,
      half,
      texts: [{ field: 'instruction', text: text(row.instruction_text)! }],
    }),
  },
  // Level 3: a game is its spec; its seed (the game id) with every other value of the spec within a few tokens.
  episode: {
    fits: (row) => typeof row.seed === 'number',
    item: (row, half) => {
      const companions = Object.entries(row)
        .filter(([key, value]) => key !== 'seed' && (typeof value === 'string' || typeof value === 'number'))
        .map(([, value]) => String(value));
      return { id: `seed ${String(row.seed)}`, half, texts: [], record: { anchor: String(row.seed), companions } };
    },
  },
};

/** Reads both halves of a hidden evaluation set (`<evalDir>/public.jsonl`, `private.jsonl`) as items. */
export function readHiddenItems(evalDir: string, kindName?: string): HiddenItem[] {
  return readItemSets(evalDir, halves, kindName);
}

/** Reads a task's decoys (`<evalDir>/decoys.jsonl`) as items of the evaluation set's kind; none where the task has none (the full tier). */
export function readDecoyItems(evalDir: string, kindName?: string): HiddenItem[] {
  return existsSync(join(evalDir, 'decoys.jsonl')) ? readItemSets(evalDir, ['decoy'], kindName) : [];
}

function readItemSets(evalDir: string, sets: readonly ItemSet[], kindName: string | undefined): HiddenItem[] {
  const items: HiddenItem[] = [];
  let kind: ItemKind | undefined = kindName === undefined ? undefined : lookup(itemKinds, kindName, 'hidden item kind');
  for (const half of sets) {
    const path = join(evalDir, `${half === 'decoy' ? 'decoys' : half}.jsonl`);
    if (!existsSync(path)) throw new A2rlError('UNAVAILABLE', `${path} is missing: the task's hidden evaluation set cannot be read.`);
    readFileSync(path, 'utf8')
      .split('\n')
      .forEach((line, index) => {
        if (line.trim() === '') return;
        const row = JSON.parse(line) as Row;
        kind ??= Object.values(itemKinds).find((candidate) => candidate.fits(row));
        if (!kind) {
          throw new A2rlError(
            'INVALID_INPUT',
            `${path}: no hidden item kind fits its rows (fields ${Object.keys(row).join(', ')}); name one in task.json's integrity.items: ${Object.keys(itemKinds).join(', ')}.`,
          );
        }
        items.push(kind.item(row, half, index + 1));
      });
  }
  return items;
}
