import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { LaunchedRun } from '../../src/launch/launcher.js';
import { cliEntry, tasksRoot } from '../../src/util/paths.js';
import { tempDir } from '../helpers/sandbox.js';

/** `a2rl run` on a home; resolves with the exit code and the launched runs. */
function a2rlRun(home: string, args: string[]): Promise<{ code: number | null; stderr: string; runs: LaunchedRun[] }> {
  const child = spawn(process.execPath, [cliEntry, '--home', home, 'run', '--task', 'micro-gsm8k', '--json', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stderr, runs: stdout ? JSON.parse(stdout) : [] })));
}

describe('red team: the agent process is jailed (invariant 7)', { timeout: 300_000 }, () => {
  it('a command agent with a shell reads no evaluation data, no store, no other run and no operator home; it writes only its own folders', async () => {
    const home = tempDir('redteam-jail');
    // Another run, with a file in its workspace and its agent folder.
    const replay = join(tempDir('redteam-jail-replay'), 'other.jsonl');
    writeFileSync(replay, JSON.stringify({ tool: 'write_file', arguments: { path: 'code/secret.txt', content: 'OTHER-RUN-SECRET' } }));
    const other = await a2rlRun(home, ['--agent', `replay:${replay}`]);
    expect(other.code, other.stderr).toBe(0);
    const otherRun = join(home, 'runs', other.runs[0]!.run_id);
    expect(readFileSync(join(otherRun, 'workspace', 'code', 'secret.txt'), 'utf8')).toBe('OTHER-RUN-SECRET');

    const evalFile = join(tasksRoot, 'micro-gsm8k', 'eval', 'private.jsonl');
    const probes: Array<[string, string]> = [
      ['eval', `cat ${evalFile}`],
      ['tasks', `ls ${tasksRoot}`],
      ['store', `cat ${join(home, 'store.sqlite')}`],
      ['home', `ls ${home}`],
      ['other-workspace', `cat ${join(otherRun, 'workspace', 'code', 'secret.txt')}`],
      ['other-agent', `ls ${join(otherRun, 'agent')}`],
      ['operator-home', `ls -a ${homedir()}`],
      ['runs', `ls ${join(home, 'runs')}`],
      ['a2rl-home-env', 'test -n "$A2RL_HOME" && echo "$A2RL_HOME"'],
      ['write-usr', 'touch /usr/pwned && echo wrote'],
      ['write-own', 'echo mine > own.txt && cat own.txt'],
    ];
    // Each probe's output and status go to a report in the agent's own working folder.
    const command = probes.map(([name, probe]) => `echo "== ${name}"; (${probe}) 2>&1; echo "rc=$?"`).join('; ');
    const attack = await a2rlRun(home, ['--agent', `command:{ ${command}; } > report.txt`]);
    // It never connected: no tools, an infrastructure failure (retried once), and a2rl run says so.
    expect(attack.code).toBe(1);
    expect(attack.runs).toHaveLength(2);
    const own = join(home, 'runs', attack.runs[0]!.run_id);
    const report = readFileSync(join(own, 'agent', 'work', 'report.txt'), 'utf8');
    const section = (name: string) => report.split(`== ${name}\n`)[1]!.split('\n== ')[0]!;
    const evalLine = readFileSync(evalFile, 'utf8').split('\n')[0]!;
    expect(report).not.toContain(evalLine.slice(0, 40));
    expect(report).not.toContain('OTHER-RUN-SECRET');
    expect(report).not.toContain('SQLite format');
    for (const name of ['eval', 'tasks', 'store', 'other-workspace', 'operator-home']) expect(section(name), name).toMatch(/rc=[12]/);
    // Where the run's own folder lies, the home shows only the path to it: no store, no other run.
    expect(section('home').trim().split('\n').slice(0, -1)).toEqual(['runs']);
    expect(section('runs').trim().split('\n').slice(0, -1)).toEqual([attack.runs[0]!.run_id]);
    expect(section('other-agent')).toMatch(/rc=[12]/);
    expect(section('a2rl-home-env')).toMatch(/^rc=1/);
    expect(section('write-usr')).toMatch(/rc=1/);
    expect(section('write-own')).toBe('mine\nrc=0\n');
    // The host is untouched, and the other run's files are as they were.
    expect(readdirSync('/usr')).not.toContain('pwned');
    expect(readFileSync(join(otherRun, 'workspace', 'code', 'secret.txt'), 'utf8')).toBe('OTHER-RUN-SECRET');
  });
});
