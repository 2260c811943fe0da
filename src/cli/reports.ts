import { type Command, InvalidArgumentError, Option } from 'commander';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { analyzeRun, loadRunFacts } from '../reports/analysis.js';
import { A2rlError } from '../util/errors.js';
import { exportRun } from '../reports/export.js';
import {
  type FlaggedPolicy,
  flaggedPolicies,
  leaderboardCsv,
  leaderboardHtml,
  leaderboardMarkdown,
  leaderboardRows,
} from '../reports/leaderboard.js';
import { writeNarrative } from '../reports/narrative.js';
import { renderMarkdown } from '../reports/render.js';
import { runIntegrity } from '../integrity/verdict.js';
import { Store } from '../store/store.js';
import { getTaskFile } from '../tasks/task.js';
import { loadPriceTable, type PriceTable } from '../transcripts/prices.js';
import { runUsage } from '../transcripts/run-usage.js';

/** `--prices FILE`: the operator's price table, for agents that report tokens but no dollars (docs/operating.md, "Tokens and cost"). */
const pricesOption = (file: string): PriceTable => {
  try {
    return loadPriceTable(file);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
};
const pricesHelp =
  "price table (JSON, USD per million tokens) for agents that report tokens but no dollars; default: a2rl's dated list prices";

/** Opens an existing store read for reporting; a missing one is an error, not a new empty store. */
function openStore(home: string): Store {
  const path = join(home, 'store.sqlite');
  if (!existsSync(path)) {
    throw new A2rlError('NOT_FOUND', `No a2rl store at ${path}; pass the --home the runs were made with (or set A2RL_HOME).`);
  }
  return new Store(path);
}

function requireRun(store: Store, runId: string): void {
  if (!store.getRun(runId)) throw new A2rlError('NOT_FOUND', `No run "${runId}" in ${store.path}; list the runs with a2rl runs list.`);
}

interface ReportOptions {
  format: 'html' | 'md' | 'json';
  prices?: PriceTable;
  out?: string;
  llm?: boolean;
  llmUrl?: string;
  llmModel?: string;
  llmKeyEnv: string;
}

/** `a2rl runs export`, `a2rl report` and `a2rl leaderboard`. */
export function addReportCommands(program: Command, runs: Command, home: () => string): void {
  runs
    .command('export <run-id>')
    .description(
      'write a run as one self-contained folder (events JSONL, job logs, trajectories, code snapshots, scores, report); format in README',
    )
    .option('--out <dir>', 'folder to write (default ./a2rl-run-<run-id>)')
    .option('--prices <file>', pricesHelp, pricesOption)
    .action((runId: string, options: { out?: string; prices?: PriceTable }) => {
      const store = openStore(home());
      try {
        requireRun(store, runId);
        const { dir } = exportRun(store, runId, resolve(options.out ?? `a2rl-run-${runId}`), undefined, options.prices);
        process.stdout.write(`${dir}\n`);
      } finally {
        store.close();
      }
    });

  program
    .command('report <run-id>')
    .description("a run's post-hoc summary: metrics, iterations, charts; HTML (an export folder with report.html), Markdown or JSON")
    .addOption(
      new Option('--format <format>', 'html: a folder with report.html and what it links to; md, json: the same facts as text')
        .choices(['html', 'md', 'json'])
        .default('html'),
    )
    .option('--out <path>', 'html: folder to write (default ./a2rl-report-<run-id>); md, json: file to write (default stdout)')
    .option('--llm', 'add a narrative written by a language model from the facts (OpenAI-compatible endpoint)')
    .option('--llm-url <url>', 'OpenAI-compatible base URL for --llm, e.g. http://127.0.0.1:8000/v1')
    .option('--llm-model <name>', 'model name for --llm')
    .option('--llm-key-env <name>', 'environment variable holding the API key for --llm', 'A2RL_LLM_API_KEY')
    .option('--prices <file>', pricesHelp, pricesOption)
    .action(async (runId: string, options: ReportOptions) => {
      if (options.llm && (!options.llmUrl || !options.llmModel)) {
        throw new A2rlError('INVALID_INPUT', '--llm needs --llm-url (an OpenAI-compatible base URL) and --llm-model.');
      }
      const store = openStore(home());
      try {
        requireRun(store, runId);
        const analysis = analyzeRun(loadRunFacts(store, runId));
        const narrative = options.llm
          ? await writeNarrative(analysis, { baseUrl: options.llmUrl!, model: options.llmModel!, apiKey: process.env[options.llmKeyEnv] })
          : undefined;
        if (options.format === 'html') {
          const { dir } = exportRun(store, runId, resolve(options.out ?? `a2rl-report-${runId}`), narrative, options.prices);
          process.stdout.write(`${join(dir, 'report.html')}\n`);
          return;
        }
        const usage = runUsage(store, runId, options.prices);
        const integrity = runIntegrity(store, runId);
        const text =
          options.format === 'md'
            ? renderMarkdown(analysis, narrative, usage, integrity)
            : `${JSON.stringify({ ...analysis, agent_usage: usage, integrity, narrative: narrative ?? null }, null, 2)}\n`;
        if (options.out) writeFileSync(options.out, text);
        else process.stdout.write(text);
      } finally {
        store.close();
      }
    });

  program
    .command('leaderboard')
    .description(
      'results over repeated runs by agent, driver model and task: mean, std, 95% bootstrap CI, success rate; writes HTML, Markdown and CSV',
    )
    .option('--task <id>', 'only this task', (value: string) => {
      try {
        return getTaskFile(value).id;
      } catch (error) {
        throw new InvalidArgumentError((error as Error).message);
      }
    })
    .option('--out <dir>', 'folder for leaderboard.html, leaderboard.md and leaderboard.csv', '.')
    .option('--json', 'print the rows as JSON on stdout and write no files')
    .option('--prices <file>', pricesHelp, pricesOption)
    .addOption(
      new Option(
        '--flagged <policy>',
        'how runs an integrity check flagged, or whose check is incomplete, are scored: as their baseline, as they scored, or left out (every column then from the runs left)',
      )
        .choices(flaggedPolicies)
        .default('baseline'),
    )
    .action((options: { task?: string; out: string; json?: boolean; prices?: PriceTable; flagged: FlaggedPolicy }) => {
      const store = openStore(home());
      try {
        const rows = leaderboardRows(store, options);
        if (options.json) {
          process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
          return;
        }
        if (rows.length === 0) {
          throw new A2rlError(
            'NOT_FOUND',
            `No ended run${options.task ? ` of ${options.task}` : ''} with a graded baseline in ${store.path}; nothing to rank.`,
          );
        }
        mkdirSync(options.out, { recursive: true });
        writeFileSync(join(options.out, 'leaderboard.html'), leaderboardHtml(rows, options.flagged));
        writeFileSync(join(options.out, 'leaderboard.md'), leaderboardMarkdown(rows, options.flagged));
        writeFileSync(join(options.out, 'leaderboard.csv'), leaderboardCsv(rows));
        process.stdout.write(leaderboardMarkdown(rows, options.flagged));
        process.stdout.write(`\nwritten to ${resolve(options.out)}/leaderboard.{html,md,csv}\n`);
      } finally {
        store.close();
      }
    });
}
