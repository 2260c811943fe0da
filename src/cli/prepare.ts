import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type Command } from 'commander';
import { A2rlError } from '../util/errors.js';
import { packageRoot, tasksRoot } from '../util/paths.js';
import type { CliContext } from './options.js';

/** The full tier's Python, which holds the loading code (tasks/hflm/assets.py); scripts/setup.sh builds it. */
const fullTierPython = join(packageRoot, '.venv-full', 'bin', 'python');

/** `a2rl prepare <task>`: a full-tier task's splits and base model under the home, from the hub or a snapshot folder. */
export function addPrepareCommand(program: Command, context: CliContext): void {
  program
    .command('prepare <task>')
    .description(
      "build a full-tier task's splits and base model under the home (assets/<task>/, models/<org>--<name>/, sha256 manifests): " +
        'downloaded from the Hugging Face hub, or --from a snapshot folder on hosts without hub access',
    )
    .option('--model <id>', "the base model's Hugging Face id (default: the task's)")
    .option('--from <dir>', 'a snapshot folder holding datasets/<repo id>/ and models/<model id>/ (docs/operating.md)')
    .action((task: string, options: { model?: string; from?: string }) => {
      if (!existsSync(fullTierPython)) {
        throw new A2rlError(
          'UNAVAILABLE',
          `${fullTierPython} is missing: run scripts/setup.sh (it builds .venv-full), then prepare again.`,
        );
      }
      const args = ['-m', 'hflm.assets', 'prepare', task, '--home', context.home()];
      if (options.model) args.push('--model', options.model);
      if (options.from) args.push('--from', resolve(options.from));
      // The module prints each file it wrote (path, bytes, sha256) and its refusals itself.
      const result = spawnSync(fullTierPython, args, { stdio: 'inherit', env: { ...process.env, PYTHONPATH: tasksRoot } });
      if (result.error) throw new A2rlError('INTERNAL', `could not start ${fullTierPython}: ${result.error.message}`);
      process.exitCode = result.status ?? 1;
    });
}
