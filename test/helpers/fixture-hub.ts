import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { packageRoot, tasksRoot } from '../../src/util/paths.js';
import { tempDir } from './sandbox.js';

/** The full tier's Python (scripts/setup.sh builds it). */
export const fullTierPython = join(packageRoot, '.venv-full', 'bin', 'python');

/** The model id under which the fixture hub holds its tiny Qwen2. */
export const fixtureModelId = 'a2rl-fixture/tiny-qwen2';

/**
 * A fixture hub snapshot for `a2rl prepare --from`: the full tier's sources in their exact formats and a tiny model
 * (tasks/hflm-tests/fixture_hub.py). The default profile has a few rows each (about 3 s); `smoke`, the CPU smoke
 * profile's, has data a tiny model can learn from. Returns the folder.
 */
export function writeFixtureHub(profile: 'default' | 'smoke' = 'default'): string {
  const dir = tempDir('hub');
  const args = profile === 'default' ? [] : ['--profile', profile];
  execFileSync(fullTierPython, [join(tasksRoot, 'hflm-tests', 'fixture_hub.py'), ...args, dir], { stdio: 'pipe' });
  return dir;
}
