import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type Command } from 'commander';
import { A2rlError } from '../util/errors.js';
import { packageRoot, tasksRoot } from '../util/paths.js';
import { startProgress } from '../util/progress.js';
import { writeBundle } from './gpu-bundle.js';
import type { CliContext } from './options.js';

/** The full tier's Python, which holds the loading code (tasks/hflm/assets.py); scripts/setup.sh builds it. */
const fullTierPython = join(packageRoot, '.venv-full', 'bin', 'python');

/** `a2rl prepare <task>`: a full-tier task's splits and base model under the home, from the hub or a snapshot folder. */
export function addPrepareCommand(program: Command, context: CliContext): void {
  program
    .command('prepare [task]')
    .description(
      "build a full-tier task's splits and base model under the home (assets/<task>/, models/<org>--<name>/, sha256 manifests): " +
        'downloaded from the Hugging Face hub, or --from a snapshot folder on hosts without hub access',
    )
    .option('--model <id>', "the base model's Hugging Face id (default: the task's)")
    .option('--from <dir>', 'a snapshot folder holding datasets/<repo id>/ and models/<model id>/ (docs/operating.md)')
    .option('--bundle <dir>', "instead of a task: every wheel of a GPU host's runtime, for a setup with no network (src/cli/gpu-bundle.ts)")
    .option('--route <route>', "with --bundle: the GPU host's route, cu126, cu128, cu130 or cpu (default: this host's)")
    .option('--requirements <file>', "with --bundle: a lock file of one's own instead of a route's")
    .action(
      async (
        task: string | undefined,
        options: { model?: string; from?: string; bundle?: string; route?: string; requirements?: string },
      ) => {
        if (options.bundle !== undefined) {
          if (task !== undefined) throw new A2rlError('INVALID_INPUT', 'Give a task or --bundle DIR, not both: a bundle holds no task.');
          for (const line of writeBundle(options.bundle, { route: options.route, requirements: options.requirements }))
            process.stdout.write(`${line}\n`);
          return;
        }
        if (task === undefined) throw new A2rlError('INVALID_INPUT', 'Name a full-tier task (a2rl prepare gsm8k), or give --bundle DIR.');
        if (options.route !== undefined || options.requirements !== undefined) {
          throw new A2rlError('INVALID_INPUT', '--route and --requirements go with --bundle DIR; leave them out to prepare a task.');
        }
        if (!existsSync(fullTierPython)) {
          throw new A2rlError(
            'UNAVAILABLE',
            `${fullTierPython} is missing: run scripts/setup.sh (it builds .venv-full), then prepare again.`,
          );
        }
        const args = ['-m', 'hflm.assets', 'prepare', task, '--home', context.home()];
        if (options.model) args.push('--model', options.model);
        if (options.from) args.push('--from', resolve(options.from));
        // The module prints each file it wrote (path, bytes, sha256) and its refusals itself; downloads between them
        // can take minutes, so progress lines say the work is alive. Unbuffered: each line as it is printed, not all
        // at exit (a pipe is no terminal). No progress bars: their \r redraws would each be a line of their own here.
        const child = spawn(fullTierPython, args, {
          stdio: ['ignore', 'pipe', 'pipe'],
          env: { ...process.env, PYTHONPATH: tasksRoot, PYTHONUNBUFFERED: '1', HF_HUB_DISABLE_PROGRESS_BARS: '1', TQDM_DISABLE: '1' },
        });
        const progress = startProgress(`a2rl prepare ${task}`, undefined);
        createInterface({ input: child.stdout }).on('line', (line) => {
          progress.print(line, process.stdout);
          // Each line is a file written (path, bytes, sha256): the progress counts them.
          progress.tick(`wrote ${line.split('\t')[0]}`);
        });
        createInterface({ input: child.stderr }).on('line', (line) => progress.print(line));
        const [status, error] = await new Promise<[number | null, Error?]>((resolve) => {
          child.once('error', (failed) => resolve([null, failed]));
          child.once('close', (code) => resolve([code]));
        });
        progress.stop();
        if (error) throw new A2rlError('INTERNAL', `could not start ${fullTierPython}: ${error.message}`);
        process.exitCode = status ?? 1;
      },
    );
}
