import type { Command } from 'commander';
import { join } from 'node:path';
import { LlmJudge } from '../grading/judge/llm.js';
import { IntegrityChecks } from '../integrity/background.js';
import { type ContaminationDetails, recordIncompleteContaminationCheck } from '../integrity/check.js';
import { recordReview } from '../integrity/review.js';
import { Store } from '../store/store.js';
import { A2rlError } from '../util/errors.js';
import { addJudgeOptions, type CliContext, judgeConfig, type JudgeOptions } from './options.js';

/** `a2rl runs check <run>` (the contamination check, again, on demand) and `a2rl runs review <run>` (the judge's review). */
export function addIntegrityCommands(runs: Command, { home }: CliContext): void {
  runs
    .command('check <run-id>')
    .description(
      "look for the task's hidden evaluation items in everything the run could train from; records the verdict (the server also checks every run when it ends)",
    )
    .option('--json', 'print the verdict and its evidence as JSON')
    .action(async (runId: string, options: { json?: boolean }) => {
      const store = new Store(join(home(), 'store.sqlite'));
      try {
        if (!store.getRun(runId)) throw new A2rlError('NOT_FOUND', `No run "${runId}" in ${home()}; a2rl runs list shows the runs.`);
        // In a process of its own, as the server runs it: whatever a file does to the check, this one records it incomplete.
        const checks = new IntegrityChecks(home(), store.path, (id, unfinished) =>
          recordIncompleteContaminationCheck(store, id, unfinished),
        );
        const before = store.latestIntegrityCheck(runId, 'contamination')?.id;
        checks.start(runId);
        await checks.drain();
        const check = store.latestIntegrityCheck(runId, 'contamination');
        if (!check || check.id === before) {
          throw new A2rlError(
            'CONFLICT',
            `Another process is checking run ${runId} now and records its verdict; run this again when it is done.`,
          );
        }
        const verdict = check.verdict;
        const details = JSON.parse(check.details) as ContaminationDetails | { error: string };
        if (options.json) {
          process.stdout.write(`${JSON.stringify({ run_id: runId, verdict, ...details })}\n`);
          return;
        }
        if ('error' in details) {
          process.stdout.write(`run ${runId}: incomplete: the check did not finish: ${details.error}\n`);
          return;
        }
        const { settings, coverage } = details;
        process.stdout.write(
          `run ${runId}: ${verdict}: ${details.matched} of ${details.matchable} findable hidden items found (${details.items} in all; flagged from ${settings.flag_at_items}; ${settings.n}-grams)\n` +
            (details.decoys
              ? `decoys (drawn like the hidden items, never shown): ${details.decoys.matched} of ${details.decoys.matchable} found; p = ${details.decoys.p_value.toPrecision(2)} that chance explains the hidden items found (flagged below ${settings.flag_below_p}, or whatever p from ${Math.ceil(settings.flag_at_share * details.items)} + √(items found) hidden items beyond what the decoys found explain)\n`
              : '') +
            `read ${coverage.files} texts (${coverage.bytes} bytes), ${coverage.binary_files} binary files by their strings (${coverage.binary_bytes} bytes), ${coverage.members} archive members, ${coverage.write_file_calls} write_file calls, ${coverage.command_lines} command lines, ${coverage.code_snapshots} code snapshots, ${coverage.submissions} submissions` +
            (coverage.unread.length > 0
              ? `; not read (${(coverage.unread_share * 100).toFixed(2)}% of the bytes): ${coverage.unread.map((u) => `${u.source.path} (${u.bytes} bytes: ${u.reason})`).join(', ')}`
              : '') +
            '\n',
        );
        for (const item of details.matched_items) {
          const e = item.evidence[0]!;
          process.stdout.write(
            `  ${item.id} (${item.half}, ${e.field}${e.with_answer ? ' with its answer' : ''}): ${e.source.kind} ${e.source.path} line ${e.line}\n`,
          );
        }
      } finally {
        store.close();
      }
    });

  addJudgeOptions(
    runs
      .command('review <run-id>')
      .description(
        "have an LLM judge review the run's code, tool calls and contamination evidence for test-set use, another model and attacks on the grader or server; records its verdict",
      )
      .option('--json', 'print the verdict and the judge answer as JSON'),
    'the reviewer: llm (any OpenAI-compatible endpoint); the rubric judge cannot review',
  ).action(async (runId: string, options: JudgeOptions & { json?: boolean }) => {
    const config = judgeConfig(options);
    if (config.kind !== 'llm') {
      throw new A2rlError('INVALID_INPUT', 'The review needs an LLM judge: give --judge llm --judge-url URL --judge-model NAME.');
    }
    const store = new Store(join(home(), 'store.sqlite'));
    try {
      const { verdict, details } = await recordReview(store, home(), runId, new LlmJudge(store, config));
      process.stdout.write(
        options.json
          ? `${JSON.stringify({ run_id: runId, verdict, ...details })}\n`
          : `run ${runId}: review ${verdict} (${String(details.judge)}, ${String(details.prompt_version)})\n`,
      );
      if (verdict === 'failed') process.exitCode = 1;
    } finally {
      store.close();
    }
  });
}
