import { InvalidArgumentError, Option, type Command } from 'commander';
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { JudgeConfig } from '../grading/judge/registry.js';
import { judgeNames } from '../grading/judge/registry.js';
import { alpacaEvalAnnotatorNames, type AlpacaEvalAnnotatorName } from '../grading/judge/alpaca-eval-annotators.js';
import { defaultAnnotator } from '../grading/judge/llm.js';
import { parseGpuList } from '../jobs/gpu-allocator.js';
import { type BackendSettings, type SandboxName, sandboxNames } from '../../sandbox/registry.js';
import { parseBudget } from '../tasks/budget.js';
import { getTaskFile } from '../tasks/task.js';
import { A2rlError, isA2rlError } from '../util/errors.js';
import type { SearchSettings } from '../search/provider.js';
import { searchProviderNames } from '../search/providers/index.js';

/** What every command group is given: the store's folder, from the global --home. */
export interface CliContext {
  home: () => string;
}

/**
 * A --home given on the command line must exist: a typo would otherwise start a new, empty store beside the old one,
 * and its runs would look gone. A new home is made by asking for it (--init); the default home ($A2RL_HOME, else
 * ~/.a2rl) is made on first use.
 */
export function checkHome(home: string, { given, init }: { given: boolean; init: boolean }): void {
  if (existsSync(home)) {
    if (!statSync(home).isDirectory())
      throw new A2rlError('INVALID_INPUT', `--home ${home} is a file, not a folder: give the folder of an a2rl home.`);
    return;
  }
  if (given && !init) {
    throw new A2rlError(
      'NOT_FOUND',
      `--home ${home} does not exist: check its spelling (the runs of a home are in its store.sqlite), or add --init to make a new home there.`,
    );
  }
  // The folder nearest to it that exists must be writable (a read-only disk, no permission): said of that folder.
  let existing = dirname(resolve(home));
  while (!existsSync(existing)) existing = dirname(existing);
  if (statSync(existing).isDirectory()) accessSync(existing, constants.W_OK);
}

/** Runs a parser, turning the project's errors into commander's, so they print as option errors. */
function asOptionError<T>(parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    throw new InvalidArgumentError(isA2rlError(error) ? error.message : String(error));
  }
}

/** A shipped task of either tier: whether a run of it can start (a full task's assets) is the engine's to say. */
export const taskOption = (value: string): string => asOptionError(() => getTaskFile(value).id);

export function budgetOption(value: string): string {
  asOptionError(() => parseBudget(value, { wallSeconds: 1, computeSeconds: 1, submissions: 1, rolloutEpisodes: 1 }));
  return value;
}

export const gpusOption = (value: string): number[] => asOptionError(() => parseGpuList(value));

export interface JudgeOptions {
  judge: JudgeConfig['kind'];
  judgeUrl?: string;
  judgeModel?: string;
  judgeKeyEnv: string;
  /** How an LLM judge annotates the full tier's AlpacaEval (default: the reference harness's annotator). */
  judgeAnnotator?: AlpacaEvalAnnotatorName;
}

export function judgeConfig(options: JudgeOptions): JudgeConfig {
  if (options.judge === 'rubric') {
    const llmOnly = (['judgeUrl', 'judgeModel', 'judgeAnnotator'] as const).filter((key) => options[key] !== undefined);
    if (llmOnly.length > 0) {
      const flags = llmOnly.map((key) => `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`).join(', ');
      throw new InvalidArgumentError(
        `${flags} ${llmOnly.length > 1 ? 'are' : 'is'} for --judge llm: add --judge llm, or drop ${llmOnly.length > 1 ? 'them' : 'it'} to judge with the task's rubric.`,
      );
    }
    return { kind: 'rubric' };
  }
  if (!options.judgeUrl || !options.judgeModel) {
    throw new InvalidArgumentError(
      '--judge llm needs --judge-url (an OpenAI-compatible base URL, e.g. https://api.openai.com/v1) and --judge-model.',
    );
  }
  return {
    kind: 'llm',
    baseUrl: options.judgeUrl,
    model: options.judgeModel,
    apiKey: process.env[options.judgeKeyEnv],
    ...(options.judgeAnnotator ? { annotator: options.judgeAnnotator } : {}),
  };
}

/** `--judge` and its settings, the same on every command that grades. */
export function addJudgeOptions(command: Command, description = "judge of judge-graded tasks: the task's rubric or an LLM"): Command {
  return command
    .addOption(new Option('--judge <kind>', description).choices(judgeNames).default('rubric'))
    .option('--judge-url <url>', 'OpenAI-compatible base URL for --judge llm, e.g. https://api.openai.com/v1')
    .option('--judge-model <name>', 'model name for --judge llm')
    .option('--judge-key-env <name>', 'environment variable holding the API key for --judge llm', 'A2RL_JUDGE_API_KEY')
    .addOption(
      new Option(
        '--judge-annotator <name>',
        `how --judge llm annotates the full tier's alpacaeval: the reference harness's ${defaultAnnotator} (default) or AlpacaEval 2.0's weighted_alpaca_eval_gpt4_turbo (log-probability weighted; the endpoint must return logprobs)`,
      ).choices(alpacaEvalAnnotatorNames),
    );
}

/** The judge flags as given, for a child `serve` that must grade with the same judge. */
export function judgeArgs(options: JudgeOptions): string[] {
  const args = ['--judge', options.judge, '--judge-key-env', options.judgeKeyEnv];
  if (options.judgeUrl) args.push('--judge-url', options.judgeUrl);
  if (options.judgeModel) args.push('--judge-model', options.judgeModel);
  if (options.judgeAnnotator) args.push('--judge-annotator', options.judgeAnnotator);
  return args;
}

/** `--sandbox`, also set by $A2RL_SANDBOX: the one switch between backends, for serve and everything that serves runs. */
export const sandboxOption = () =>
  new Option('--sandbox <backend>', 'sandbox backend of runs and grading (a2rl doctor shows which work here)')
    .choices(sandboxNames)
    .env('A2RL_SANDBOX')
    .default('bwrap');

/** The backend flags, as every command that serves runs takes them. */
export interface SandboxOptions {
  sandbox: SandboxName;
  sharedRoot?: string;
  slurmPartition?: string;
  slurmQos?: string;
  slurmGradingPartition?: string;
  slurmGradingQos?: string;
  slurmConf?: string;
}

/** `--sandbox` and the settings of backends that need some (Slurm), each also set by an environment variable. */
export function addSandboxOptions(command: Command): Command {
  return command
    .addOption(sandboxOption())
    .addOption(
      new Option('--shared-root <dir>', 'slurm: a folder every node sees at the same path (the server home lies under it)').env(
        'A2RL_SHARED_ROOT',
      ),
    )
    .addOption(new Option('--slurm-partition <name>', "slurm: partition of the agents' jobs").env('A2RL_SLURM_PARTITION'))
    .addOption(new Option('--slurm-qos <name>', "slurm: QOS of the agents' jobs").env('A2RL_SLURM_QOS'))
    .addOption(
      new Option('--slurm-grading-partition <name>', 'slurm: partition of grading (default: the agents’)').env(
        'A2RL_SLURM_GRADING_PARTITION',
      ),
    )
    .addOption(new Option('--slurm-grading-qos <name>', 'slurm: QOS of grading (default: the agents’)').env('A2RL_SLURM_GRADING_QOS'))
    .addOption(new Option('--slurm-conf <file>', "slurm: the cluster's slurm.conf, where not Slurm's default").env('SLURM_CONF'));
}

export function backendSettings(options: SandboxOptions): BackendSettings {
  return {
    slurm: {
      sharedRoot: options.sharedRoot,
      partition: options.slurmPartition,
      qos: options.slurmQos,
      gradingPartition: options.slurmGradingPartition,
      gradingQos: options.slurmGradingQos,
      conf: options.slurmConf,
    },
  };
}

/** The backend flags as given, for a child `serve` that must run jobs where its parent does. */
export function sandboxArgs(options: SandboxOptions): string[] {
  const flags: Array<[string, string | undefined]> = [
    ['--sandbox', options.sandbox],
    ['--shared-root', options.sharedRoot],
    ['--slurm-partition', options.slurmPartition],
    ['--slurm-qos', options.slurmQos],
    ['--slurm-grading-partition', options.slurmGradingPartition],
    ['--slurm-grading-qos', options.slurmGradingQos],
    ['--slurm-conf', options.slurmConf],
  ];
  return flags.flatMap(([flag, value]) => (value === undefined ? [] : [flag, value]));
}

export function maxJobsOption(value: string): number {
  const jobs = Number(value);
  if (!Number.isInteger(jobs) || jobs < 1) throw new InvalidArgumentError('Give a whole number of jobs, at least 1.');
  return jobs;
}

export function idleSecondsOption(value: string): number {
  const seconds = Number(value);
  if (!Number.isFinite(seconds) || seconds <= 0) throw new InvalidArgumentError('Give a number of seconds above 0, e.g. 1800.');
  return seconds;
}

export function diskQuotaOption(value: string): number {
  const mib = Number(value);
  if (!Number.isInteger(mib) || mib < 1) throw new InvalidArgumentError('Give the quota as a whole number of MiB, at least 1, e.g. 4096.');
  return mib * 2 ** 20;
}

export function wholeNumberOption(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('Give a whole number, at least 1.');
  return n;
}

export function portOption(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new InvalidArgumentError('Give a port number from 0 to 65535 (0: any free port).');
  return port;
}

/** The search flags, as every command that serves runs takes them. */
export interface SearchOptions {
  search?: string;
  searchKeyEnv: string;
  searchUrl?: string;
  searchCorpus?: string;
}

/** `--search` and its settings: the provider that answers the search channel of runs whose budget allows queries. */
export function addSearchOptions(command: Command): Command {
  return command
    .addOption(
      new Option(
        '--search <provider>',
        'search provider for runs whose budget allows search queries (a task such as deepsearchqa)',
      ).choices(searchProviderNames),
    )
    .option('--search-key-env <name>', 'environment variable holding the search provider’s API key (serpapi)', 'A2RL_SEARCH_API_KEY')
    .option('--search-url <url>', 'serpapi, duckduckgo: the provider’s endpoint, where not the public one (a proxy)')
    .option('--search-corpus <file>', 'local: the corpus, a JSONL file of {"title", "text", "url"}');
}

/** The search settings the flags ask for, the key read from the environment; undefined without --search. */
export function searchSettings(options: SearchOptions): SearchSettings | undefined {
  if (options.search === undefined) {
    if (options.searchUrl !== undefined || options.searchCorpus !== undefined)
      throw new A2rlError('INVALID_INPUT', '--search-url and --search-corpus configure a search provider: give --search too.');
    return undefined;
  }
  return {
    provider: options.search,
    apiKey: process.env[options.searchKeyEnv] || undefined,
    keyEnv: options.searchKeyEnv,
    url: options.searchUrl,
    corpus: options.searchCorpus,
  };
}

/** The search flags as given, for a child `serve` that must answer searches as its parent would (the key stays in the environment). */
export function searchArgs(options: SearchOptions): string[] {
  if (options.search === undefined) return [];
  const args = ['--search', options.search, '--search-key-env', options.searchKeyEnv];
  if (options.searchUrl) args.push('--search-url', options.searchUrl);
  if (options.searchCorpus) args.push('--search-corpus', options.searchCorpus);
  return args;
}
