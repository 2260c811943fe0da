import { spawn } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { isBubblewrap } from '../../sandbox/bwrap.js';
import { A2rlError } from '../util/errors.js';

export interface GroupCommand {
  command: string;
  args: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** The agent's stdout (its transcript) and stderr go to these files. */
  stdoutPath: string;
  stderrPath: string;
  /** When (epoch ms) the whole process group gets TERM; KILL follows `graceMs` later. */
  deadline: number;
  graceMs: number;
  /** Awaited at the deadline before the TERM (the run's server ending the run first); the KILL moves with it. */
  beforeDeadlineStop?: () => Promise<void>;
  /** Called when the operator's SIGINT or SIGTERM reaches the launcher, to pass it on to what runs outside the group. */
  onInterrupt?: (signal: NodeJS.Signals) => void;
}

export interface GroupOutcome {
  pid: number;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** The group was sent TERM at the deadline (and KILL after the grace, when anything was left). */
  stoppedAtDeadline: boolean;
  /** The launcher was told to stop (SIGINT, SIGTERM) and passed it on: TERM, then KILL after the grace. */
  interrupted: boolean;
  killed: boolean;
  startedAt: number;
  endedAt: number;
}

/** Live (not zombie) members of a process group, from /proc: zombies whose parent never reaps them must not keep a wait going. */
export function processGroupMembers(pgid: number): number[] {
  const members: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[2]) === pgid && fields[0] !== 'Z') members.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return members;
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // The group is gone.
  }
}

/**
 * TERM to the agent's own processes, not to the bubblewrap jailing them: bwrap would die of it
 * and take the agent down at once (--die-with-parent), leaving it no grace to finish.
 */
function terminateGroup(pgid: number): void {
  for (const pid of processGroupMembers(pgid)) {
    if (isBubblewrap(pid)) continue;
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      // It ended meanwhile.
    }
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs a command as the leader of a new process group and waits until the whole group is
 * gone: the agent and what it started (its MCP server, which then finishes grading). At the
 * deadline the group gets TERM, after the grace KILL.
 */
export async function runProcessGroup(spec: GroupCommand): Promise<GroupOutcome> {
  const stdout = openSync(spec.stdoutPath, 'a');
  const stderr = openSync(spec.stderrPath, 'a');
  const startedAt = Date.now();
  const child = spawn(spec.command, spec.args, { cwd: spec.cwd, env: spec.env, detached: true, stdio: ['ignore', stdout, stderr] });
  closeSync(stdout);
  closeSync(stderr);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.once('error', (error) =>
      reject(new A2rlError('UNAVAILABLE', `Could not start ${spec.command}: ${error.message}.`, { cause: error })),
    );
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  const pgid = child.pid;
  if (pgid === undefined) {
    await exited;
    throw new A2rlError('UNAVAILABLE', `Could not start ${spec.command}.`);
  }
  let stoppedAtDeadline = false;
  let interrupted = false;
  let killed = false;
  const killNow = () => {
    killed = processGroupMembers(pgid).length > 0;
    signalGroup(pgid, 'SIGKILL');
  };
  let kill: NodeJS.Timeout | undefined;
  let over = false;
  const term = setTimeout(
    () => {
      // Whatever the wait ends with, the TERM follows, unless the agent is gone meanwhile.
      void Promise.resolve(spec.beforeDeadlineStop?.())
        .catch(() => undefined)
        .then(() => {
          if (interrupted || over) return;
          stoppedAtDeadline = true;
          terminateGroup(pgid);
          kill = setTimeout(killNow, spec.graceMs);
        });
    },
    Math.max(0, spec.deadline - Date.now()),
  );
  // The agent runs in a group of its own, so the operator's Ctrl-C reaches it only through here.
  const onInterrupt = (signal: NodeJS.Signals) => {
    interrupted = true;
    spec.onInterrupt?.(signal);
    clearTimeout(term);
    clearTimeout(kill);
    terminateGroup(pgid);
    kill = setTimeout(killNow, spec.graceMs);
  };
  process.on('SIGINT', onInterrupt);
  process.on('SIGTERM', onInterrupt);
  try {
    const { code, signal } = await exited;
    // What the agent left behind (its MCP server finishing grading) may run until the KILL.
    while (processGroupMembers(pgid).length > 0) await sleep(200);
    return { pid: pgid, exitCode: code, signal, stoppedAtDeadline, interrupted, killed, startedAt, endedAt: Date.now() };
  } finally {
    over = true;
    clearTimeout(term);
    clearTimeout(kill);
    process.off('SIGINT', onInterrupt);
    process.off('SIGTERM', onInterrupt);
  }
}
