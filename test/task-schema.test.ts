import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { getTask, listTaskIds, readTaskFile } from '../src/tasks/task.js';
import { tasksRoot } from '../src/util/paths.js';
import { tempDir } from './helpers/sandbox.js';

/** A task folder holding `declaration` as its task.json. */
function taskFolder(declaration: unknown): string {
  const dir = join(tempDir('task'), 'task');
  mkdirSync(dir);
  writeFileSync(join(dir, 'task.json'), JSON.stringify(declaration));
  return dir;
}

const gsm8k = () => JSON.parse(readFileSync(join(tasksRoot, 'gsm8k', 'task.json'), 'utf8')) as Record<string, unknown>;

describe('task.json: one schema per tier', () => {
  it('every shipped task is valid for its tier, and the tiers are listed apart', () => {
    for (const id of listTaskIds()) expect(readTaskFile(join(tasksRoot, id)).id).toBe(id);
    expect(listTaskIds('full')).toEqual(['alfworld', 'alpacaeval', 'deepsearchqa', 'gsm8k', 'humaneval', 'webshop', 'webshop-human']);
    expect(listTaskIds('micro')).toContain('micro-gsm8k');
    expect(listTaskIds('micro')).not.toContain('gsm8k');
    expect(listTaskIds().length).toBe(listTaskIds('micro').length + listTaskIds('full').length);
  });

  it('a full task declares its default model, runtime and hf-model submissions instead of in-repo data and model', () => {
    const task = readTaskFile(join(tasksRoot, 'gsm8k'));
    expect(task.tier).toBe('full');
    if (task.tier !== 'full') return;
    expect(task).toMatchObject({ defaultModel: 'Qwen/Qwen2.5-1.5B', runtime: '.venv-full', library: 'hflm' });
    expect(task.submission.kind).toBe('hf-model');
  });

  it('names a missing or unknown tier first, with the tiers it takes', () => {
    const { tier: _, ...untiered } = gsm8k();
    expect(() => readTaskFile(taskFolder(untiered))).toThrow(/"tier" is undefined; give one of "micro", "full"/);
    expect(() => readTaskFile(taskFolder({ ...gsm8k(), tier: 'huge' }))).toThrow(/"tier" is "huge"/);
  });

  it('names each bad field of a full task by its path, micro-only fields included', () => {
    const error = (declaration: unknown) => {
      try {
        readTaskFile(taskFolder(declaration));
      } catch (e) {
        return String(e);
      }
      return 'accepted';
    };
    expect(error({ ...gsm8k(), defaultModel: 'qwen' })).toMatch(
      /not a valid full-tier task: defaultModel: a Hugging Face model id, <org>\/<name>/,
    );
    expect(error({ ...gsm8k(), defaultModel: 'a/..b' })).toMatch(/defaultModel: a Hugging Face model id has no "\.\."/);
    expect(error({ ...gsm8k(), runtime: '/usr' })).toMatch(/runtime: /);
    expect(error({ ...gsm8k(), trainData: 'data' })).toMatch(/\(top level\): Unrecognized key: "trainData"/);
    expect(error({ ...gsm8k(), submission: { kind: 'hf-model', maxFiles: 64, requiredFiles: ['model.pt'] } })).toMatch(
      /submission: Unrecognized key: "requiredFiles"/,
    );
    expect(error({ ...gsm8k(), submission: { kind: 'pt', maxFiles: 64 } })).toMatch(/submission\.kind: /);
  });

  it('a micro task still needs its in-repo data, model and oracles', () => {
    const micro = JSON.parse(readFileSync(join(tasksRoot, 'micro-gsm8k', 'task.json'), 'utf8')) as Record<string, unknown>;
    const { oracles: _, ...withoutOracles } = micro;
    expect(() => readTaskFile(taskFolder(withoutOracles))).toThrow(/not a valid micro-tier task: oracles: /);
  });

  it('getTask takes micro tasks only: a full one is resolved per run, and the refusal says so', () => {
    expect(() => getTask('gsm8k')).toThrow(/gsm8k is a full-tier task: its assets live under the a2rl home \(a2rl prepare gsm8k\)/);
  });
});
