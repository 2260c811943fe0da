import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { Engine } from '../src/core/engine.js';
import { addJudgeOptions, type JudgeOptions, judgeArgs, judgeConfig } from '../src/cli/options.js';
import { Store } from '../src/store/store.js';
import { cliEntry } from '../src/util/paths.js';
import { tempDir } from './helpers/sandbox.js';

/** The judge flags as a command that grades parses them. */
function parsed(args: string[]): JudgeOptions {
  const command = addJudgeOptions(new Command('serve')).exitOverride();
  command.parse(args, { from: 'user' });
  return command.opts<JudgeOptions>();
}

const llm = ['--judge', 'llm', '--judge-url', 'http://127.0.0.1:9/v1', '--judge-model', 'gpt-4-1106-preview'];

describe('--judge-annotator: which AlpacaEval annotator an LLM judge is', () => {
  it('parses either annotator into the judge config, and a child serve is given the same flags', () => {
    const weighted = parsed([...llm, '--judge-annotator', 'weighted_alpaca_eval_gpt4_turbo']);
    expect(judgeConfig(weighted)).toMatchObject({ kind: 'llm', model: 'gpt-4-1106-preview', annotator: 'weighted_alpaca_eval_gpt4_turbo' });
    expect(judgeArgs(weighted)).toEqual(expect.arrayContaining(['--judge-annotator', 'weighted_alpaca_eval_gpt4_turbo']));
    expect(judgeConfig(parsed([...llm, '--judge-annotator', 'alpaca_eval_gpt5_2_fn']))).toMatchObject({
      annotator: 'alpaca_eval_gpt5_2_fn',
    });
    // Left out, the judge uses its default (the reference harness's annotator), and no flag is passed on.
    const plain = parsed(llm);
    expect(judgeConfig(plain)).not.toHaveProperty('annotator');
    expect(judgeArgs(plain)).not.toContain('--judge-annotator');
  });

  it('reaches the grader: the run is graded under the weighted annotator’s judge name', async () => {
    const home = tempDir('home-annotator');
    const created = (annotator: string[]) =>
      spawnSync(
        process.execPath,
        [cliEntry, '--home', home, 'runs', 'create', '--task', 'micro-alpacaeval', ...llm, ...annotator, '--json'],
        {
          encoding: 'utf8',
        },
      );
    const weighted = created(['--judge-annotator', 'weighted_alpaca_eval_gpt4_turbo']);
    const plain = created([]);
    expect(weighted.status, weighted.stderr).toBe(0);
    expect(plain.status, plain.stderr).toBe(0);
    const store = new Store(join(home, 'store.sqlite'));
    try {
      const version = (output: string) => store.getRun((JSON.parse(output) as { run_id: string }).run_id)!.grader_version;
      expect(version(weighted.stdout)).toMatch(/\/judge:llm:gpt-4-1106-preview@127\.0\.0\.1:9\/weighted_alpaca_eval_gpt4_turbo$/);
      // The default annotator keeps the judge's plain name: grades by the two protocols never mix.
      expect(version(plain.stdout)).toMatch(/\/judge:llm:gpt-4-1106-preview@127\.0\.0\.1:9$/);
    } finally {
      store.close();
    }
    // A server with the plain annotator's judge refuses the weighted run, naming the part that differs and what to do.
    const engine = await Engine.open({ home, logger: pino({ level: 'silent' }), judge: judgeConfig(parsed(llm)), recover: false });
    try {
      const refused = await engine.remoteRun((JSON.parse(weighted.stdout) as { run_id: string }).run_id).then(
        () => 'adopted',
        (error: Error) => error.message,
      );
      expect(refused).toMatch(
        /: the judge differs \(judge:llm:gpt-4-1106-preview@127\.0\.0\.1:9\/weighted_alpaca_eval_gpt4_turbo for the run, judge:llm:gpt-4-1106-preview@127\.0\.0\.1:9 here\): serve it with the --judge it was created with\.$/,
      );
    } finally {
      await engine.close();
    }
  });

  it('refuses an unknown annotator and an annotator without an LLM judge, saying what to do, creating nothing', () => {
    const home = tempDir('home-annotator-bad');
    const cli = (args: string[]) =>
      spawnSync(process.execPath, [cliEntry, '--home', home, 'runs', 'create', '--task', 'micro-alpacaeval', ...args], {
        encoding: 'utf8',
      });
    const unknown = cli([...llm, '--judge-annotator', 'alpaca_eval_gpt4']);
    expect(unknown.status).not.toBe(0);
    expect(unknown.stderr).toMatch(
      /option '--judge-annotator <name>' argument 'alpaca_eval_gpt4' is invalid\. Allowed choices are alpaca_eval_gpt5_2_fn, weighted_alpaca_eval_gpt4_turbo\./,
    );
    const rubric = cli(['--judge-annotator', 'weighted_alpaca_eval_gpt4_turbo']);
    expect(rubric.status).not.toBe(0);
    expect(rubric.stderr).toMatch(/--judge-annotator is for --judge llm: add --judge llm, or drop it to judge with the task's rubric\./);
    expect(() => judgeConfig({ ...parsed([]), judgeUrl: 'http://x/v1', judgeAnnotator: 'weighted_alpaca_eval_gpt4_turbo' })).toThrow(
      /^--judge-url, --judge-annotator are for --judge llm: add --judge llm, or drop them/,
    );
    expect(existsSync(join(home, 'store.sqlite'))).toBe(false);
  });
});
