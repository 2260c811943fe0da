import { type Command, InvalidArgumentError, Option } from 'commander';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { Engine } from '../core/engine.js';
import { agentKind, findExecutable } from '../launch/agents.js';
import { jailedAgentPaths } from '../launch/launcher.js';
import { type FlaggedPolicy, flaggedPolicies } from '../reports/leaderboard.js';
import { Store } from '../store/store.js';
import { getTaskFile } from '../tasks/task.js';
import { loadPriceTable, type PriceTable } from '../transcripts/prices.js';
import { A2rlError, exitStatuses } from '../util/errors.js';
import { createLogger } from '../util/logger.js';
import { type Cell, cellProgress, formatPlan, planCells } from '../suite/plan.js';
import { buildSuiteReport, suiteCsv, suiteHtml, suiteLatex, suiteMarkdown } from '../suite/report.js';
import { runSuite } from '../suite/runner.js';
import { loadSuite, type Suite } from '../suite/schema.js';
import {
  backendSettings,
  type CliContext,
  idleSecondsOption,
  judgeArgs,
  judgeConfig,
  type JudgeOptions,
  sandboxArgs,
  type SandboxOptions,
} from './options.js';

/** The suite file's backend as the flags `a2rl run` takes: the sandbox, its settings and the judge. */
function backendOptions(suite: Suite): SandboxOptions & JudgeOptions {
  const backend = suite.backend;
  return {
    sandbox: backend.sandbox,
    sharedRoot: backend.shared_root,
    slurmPartition: backend.slurm_partition,
    slurmQos: backend.slurm_qos,
    slurmGradingPartition: backend.slurm_grading_partition,
    slurmGradingQos: backend.slurm_grading_qos,
    slurmConf: backend.slurm_conf,
    judge: backend.judge ? 'llm' : 'rubric',
    judgeUrl: backend.judge?.url,
    judgeModel: backend.judge?.model,
    judgeKeyEnv: backend.judge?.key_env ?? 'A2RL_JUDGE_API_KEY',
    judgeAnnotator: backend.judge?.annotator as JudgeOptions['judgeAnnotator'],
  };
}

/** Runs at once: the file's, else as many as this host's CPUs hold of the tasks' jobs. */
function parallelOf(suite: Suite): number {
  if (suite.backend.parallel !== undefined) return suite.backend.parallel;
  const jobCpus = Math.max(...suite.tasks.map((task) => getTaskFile(task.id).jobs.cpus));
  return Math.max(1, Math.floor(cpus().length / jobCpus));
}

/**
 * Everything a run needs that the file cannot say, checked before any run starts: each agent is installed and its jail
 * shows nothing agents never see, and each variable it names is set (its value is read here, never written anywhere).
 */
function checkReady(cells: readonly Cell[], home: string): void {
  const problems = new Set<string>();
  for (const cell of cells) {
    try {
      jailedAgentPaths(findExecutable(agentKind(cell.agent)), cell.agentBinds, home);
    } catch (error) {
      problems.add(`${cell.id}: ${(error as Error).message}`);
    }
    for (const name of cell.agentEnv.filter((name) => !name.endsWith('*') && process.env[name] === undefined)) {
      problems.add(`${cell.id}: ${name} is not set; export it before a2rl suite run (the suite file names variables, never their values)`);
    }
  }
  if (problems.size) throw new A2rlError('INVALID_INPUT', [...problems].join('; '));
}

function openSuiteStore(home: string): Store {
  const path = join(home, 'store.sqlite');
  if (!existsSync(path))
    throw new A2rlError('NOT_FOUND', `No a2rl store at ${path}; run the suite first (a2rl suite run FILE), with the same --home.`);
  return new Store(path);
}

const reportFormats = { md: suiteMarkdown, csv: suiteCsv, latex: suiteLatex, html: suiteHtml } as const;
const reportFiles = { md: 'suite.md', csv: 'suite.csv', latex: 'suite.tex', html: 'suite.html' } as const;

/** `a2rl suite run` and `a2rl suite report`: the paper's agent × model × task matrix as one resumable job. */
export function addSuiteCommands(program: Command, { home }: CliContext): void {
  const suite = program
    .command('suite')
    .description(
      "the paper's agent × model × task matrix from a suite file (YAML or JSON; docs/reproducing.md): run it, resumably, and report it",
    );

  suite
    .command('run <file>')
    .description(
      "make every cell's missing runs, in parallel up to the backend's capacity; runs already done are kept (resume after a crash, a kill " +
        'or Ctrl-C), an infrastructure failure is retried once; progress on stderr',
    )
    .option('--dry-run', 'print the plan and the budget it would spend, and start nothing')
    .option('--progress-seconds <seconds>', 'seconds between progress lines', idleSecondsOption, 5)
    .action(async (file: string, options: { dryRun?: boolean; progressSeconds: number }) => {
      const loaded = loadSuite(file);
      const cells = planCells(loaded);
      const parallel = parallelOf(loaded);
      const flags = backendOptions(loaded);
      if (options.dryRun) {
        const path = join(home(), 'store.sqlite');
        const store = existsSync(path) ? new Store(path) : undefined;
        try {
          const progress = store
            ? cellProgress(store, cells, loaded.repeats)
            : cells.map((cell) => ({ cell, done: 0, missing: loaded.repeats, failed: 0 }));
          process.stdout.write(`${formatPlan(loaded, progress, parallel)}\n`);
        } finally {
          store?.close();
        }
        return;
      }
      checkReady(cells, home());
      // Before the engine opens the home: a refused file changes nothing. Only Slurm's jobs run on other hosts than this one.
      if (flags.sandbox !== 'slurm' && parallel > cpus().length) {
        throw new A2rlError(
          'INVALID_INPUT',
          `backend.parallel: ${parallel} runs at once is more than this host's ${cpus().length} CPUs; write at most ${cpus().length}.`,
        );
      }
      const engine = await Engine.open({
        home: home(),
        judge: judgeConfig(flags),
        recover: false,
        logger: createLogger().logger,
        sandbox: flags.sandbox,
        backendSettings: backendSettings(flags),
      });
      try {
        process.stderr.write(`${formatPlan(loaded, cellProgress(engine.store, cells, loaded.repeats), parallel)}\n`);
        const outcome = await runSuite(engine, loaded, {
          cells,
          parallel,
          serveArgs: [...judgeArgs(flags), ...sandboxArgs(flags)],
          onLine: (line) => process.stderr.write(`a2rl suite: ${line}\n`),
          progressSeconds: options.progressSeconds,
        });
        if (outcome.interrupted) {
          process.stderr.write(`a2rl suite: stopped; run a2rl suite run ${file} again to make the runs left\n`);
          process.exitCode = exitStatuses.interrupted;
        } else if (outcome.failed > 0) {
          process.stderr.write(
            `a2rl suite: ${outcome.failed} runs failed twice for their infrastructure (not counted); run the suite again to retry them\n`,
          );
          process.exitCode = exitStatuses.checkFailed;
        }
      } finally {
        await engine.close();
      }
    });

  suite
    .command('report <file>')
    .description(
      "the suite's tables: per task the baseline and each agent × model's mean score (95% CI), best run, Δ over baseline, route mix, " +
        'flagged and infrastructure-failure counts, tokens and $ per run, Δ per $; Markdown on stdout, and with --out all four formats',
    )
    .option('--out <dir>', 'folder for suite.md, suite.csv, suite.tex and suite.html')
    .addOption(new Option('--format <format>', 'what stdout gets').choices(Object.keys(reportFormats)).default('md'))
    .option(
      '--prices <file>',
      'price table (JSON, USD per million tokens) for agents that report tokens but no dollars',
      (value: string): PriceTable => {
        try {
          return loadPriceTable(value);
        } catch (error) {
          throw new InvalidArgumentError((error as Error).message);
        }
      },
    )
    .addOption(
      new Option(
        '--flagged <policy>',
        'how runs an integrity check flagged, or whose check is incomplete, are scored (as a2rl leaderboard)',
      )
        .choices(flaggedPolicies)
        .default('baseline'),
    )
    .action((file: string, options: { out?: string; format: keyof typeof reportFormats; prices?: PriceTable; flagged: FlaggedPolicy }) => {
      const loaded = loadSuite(file);
      const store = openSuiteStore(home());
      try {
        const report = buildSuiteReport(store, loaded, planCells(loaded), options.flagged, options.prices);
        if (options.out) {
          mkdirSync(options.out, { recursive: true });
          for (const [format, render] of Object.entries(reportFormats)) {
            writeFileSync(join(options.out, reportFiles[format as keyof typeof reportFiles]), render(report));
          }
        }
        process.stdout.write(reportFormats[options.format](report));
        if (options.out) process.stderr.write(`written to ${resolve(options.out)}/suite.{md,csv,tex,html}\n`);
      } finally {
        store.close();
      }
    });
}
