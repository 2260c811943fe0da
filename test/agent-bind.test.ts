import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { agentKind } from '../src/launch/agents.js';
import { assertJailable, jailCommand, maskedPackageSecrets } from '../src/launch/jail.js';
import { cliEntry, packageRoot, tasksRoot } from '../src/util/paths.js';
import { tempDir } from './helpers/sandbox.js';

/**
 * `a2rl run --agent command:'./my-agent.sh' --agent-bind .` from a checkout (a folder holding `tasks/`): the folder is
 * shown, its `tasks/` an empty read-only tmpfs. The agent runs in the real jail (bubblewrap, the forwarder first), as
 * the launcher starts it, without a run around it: a whole `a2rl run` adds its server and gradings, tested elsewhere.
 */
describe('--agent-bind . from a folder holding tasks/', () => {
  const scratch = tempDir('agent-bind');
  const home = tempDir('agent-bind-home');
  afterAll(() => {
    rmSync(scratch, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  });

  it("shows the folder's files but not tasks/' contents, read-only, and a leading ./ names the operator's file", async () => {
    const agent = join(scratch, 'my-agent.sh');
    writeFileSync(
      agent,
      `#!/bin/sh\nls ${packageRoot} > seen-root.txt\nls -A ${tasksRoot} > seen-tasks.txt\n` +
        `git -C ${packageRoot} -c safe.directory='*' show HEAD:tasks/micro-gsm8k/task.json > seen-git.txt 2>&1\n` +
        `touch ${join(tasksRoot, 'planted')} 2> seen-write.txt\necho "$@" > seen-args.txt\n`,
    );
    chmodSync(agent, 0o755);
    chmodSync(scratch, 0o755);
    // As `a2rl run` started in the checkout would: the command agent's ./ path made the operator's, the binds checked.
    const invocation = runIn(packageRoot, () => {
      for (const path of ['.', scratch]) assertJailable(path, home);
      return agentKind(`command:./${relative(packageRoot, agent)} one two`).invocation({
        endpoint: { kind: 'http', url: 'http://127.0.0.1:1/mcp', token: 'unused' },
        prompt: '',
        agentDir: join(scratch, 'agent'),
        homeDir: join(scratch, 'agent', 'home'),
        extraArgs: [],
        mcpStartTimeoutMs: 1000,
      });
    });
    expect(invocation.args).toEqual(['-c', `'${agent}' one two`]);
    const gitDir = join(packageRoot, '.git');
    // The checkout's git folder holds every version of tasks/: masked too (a worktree's .git is a file naming its own).
    expect(maskedPackageSecrets([packageRoot, scratch])).toEqual(
      existsSync(gitDir) && statSync(gitDir).isDirectory() ? [tasksRoot, gitDir] : [tasksRoot],
    );
    const workDir = join(scratch, 'agent', 'work');
    const homeDir = join(scratch, 'agent', 'home');
    const network = join(scratch, 'net');
    for (const dir of [workDir, homeDir, network]) mkdirSync(dir, { recursive: true, mode: 0o777 });
    for (const dir of [workDir, homeDir]) chmodSync(dir, 0o777);
    const jail = jailCommand({
      command: invocation.command,
      args: invocation.args,
      workDir,
      homeDir,
      readOnly: [packageRoot, scratch],
      network: { dir: network, forwards: [] },
    });
    const exit = await new Promise<number | null>((resolve) => {
      const child = spawn(jail.command, jail.args, { stdio: ['ignore', 'ignore', 'inherit'] });
      child.once('close', resolve);
    });
    expect(exit).toBe(0);
    const seen = (name: string) => readFileSync(join(workDir, name), 'utf8');
    expect(seen('seen-root.txt').split('\n')).toEqual(expect.arrayContaining(['package.json', 'src', 'tasks']));
    expect(readdirSync(tasksRoot).length).toBeGreaterThan(0);
    expect(seen('seen-tasks.txt')).toBe('');
    // Nor through the checkout's history: no repository to read (the host's git shows the file).
    expect(seen('seen-git.txt')).not.toContain('"id": "micro-gsm8k"');
    expect(seen('seen-write.txt')).toMatch(/Read-only file system/);
    expect(existsSync(join(tasksRoot, 'planted'))).toBe(false);
    expect(seen('seen-args.txt')).toBe('one two\n');
  });

  it('still refuses a folder holding the store, or lying in tasks/, saying what to do; nothing is created', () => {
    const storeHome = join(scratch, 'store-home');
    mkdirSync(storeHome);
    const refused = spawnSync(
      process.execPath,
      [cliEntry, '--home', storeHome, 'run', '--agent', 'command:true', '--task', 'micro-gsm8k', `--agent-bind=${dirname(storeHome)}`],
      { encoding: 'utf8' },
    );
    expect(refused.status).toBe(6);
    expect(refused.stderr).toContain(
      `The agent's jail cannot show ${dirname(storeHome)}: it holds the store ${storeHome}, which agents never see. ` +
        'Bind a narrower folder, or keep the home (--home, $A2RL_HOME) outside it.',
    );
    expect(readdirSync(storeHome)).toEqual([]);
    expect(() => assertJailable(join(tasksRoot, 'micro-gsm8k'), home)).toThrow(
      `it lies in ${tasksRoot}, which agents never see. Install the agent, or put what it needs, elsewhere.`,
    );
  });
});

/** Runs `work` with `dir` as the current folder (resolving relative paths as a CLI started there would). */
function runIn<T>(dir: string, work: () => T): T {
  const before = process.cwd();
  process.chdir(dir);
  try {
    return work();
  } finally {
    process.chdir(before);
  }
}
