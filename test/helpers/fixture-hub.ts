import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { packageRoot, tasksRoot } from '../../src/util/paths.js';
import { tempDir } from './sandbox.js';

/** The full tier's Python (scripts/setup.sh builds it). */
export const fullTierPython = join(packageRoot, '.venv-full', 'bin', 'python');

/** The model id under which the fixture hub holds its tiny Qwen2. */
export const fixtureModelId = 'a2rl-fixture/tiny-qwen2';

/**
 * A fixture hub snapshot for `a2rl prepare --from`: the full tier's sources in their exact formats, a few rows
 * each, and a tiny model (tasks/hflm/tests/fixture_hub.py, about 3 s). Returns the folder.
 */
export function writeFixtureHub(): string {
  const dir = tempDir('hub');
  execFileSync(fullTierPython, [join(tasksRoot, 'hflm', 'tests', 'fixture_hub.py'), dir], { stdio: 'pipe' });
  return dir;
}
