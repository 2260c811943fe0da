import { existsSync, lstatSync, realpathSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, isAbsolute, relative, resolve } from 'node:path';
import { systemArgs } from '../../sandbox/bwrap.js';
import { A2rlError } from '../util/errors.js';
import { tasksRoot } from '../util/paths.js';

/** Where the launcher's MCP bridge socket appears inside the jail (a short path: sockets have a 108-byte limit). */
export const jailSocketPath = '/run/a2rl/mcp.sock';

/** `/etc` files a networked agent needs (name resolution, TLS roots, user names) beside the sandbox's system files. */
const networkFiles = [
  '/etc/resolv.conf',
  '/etc/hosts',
  '/etc/host.conf',
  '/etc/gai.conf',
  '/etc/nsswitch.conf',
  '/etc/ssl',
  '/etc/ca-certificates',
  '/etc/passwd',
  '/etc/group',
];

export interface JailSpec {
  command: string;
  args: string[];
  /** The agent's working folder: writable, its current directory. */
  workDir: string;
  /** The private HOME the launcher prepared (the agent's configuration): writable. */
  homeDir: string;
  /** Host paths the agent reads (its installation, its configuration files), bound read-only at the same path. */
  readOnly: string[];
  /** The launcher's MCP bridge socket, bound at `jailSocketPath`. */
  socket?: string;
}

const inside = (path: string, folder: string) => {
  const rel = relative(folder, path);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
};

/**
 * The folder an agent's executable needs beside it: the `node_modules` its package lies in
 * (npm installs: the package and its dependencies), else the executable's own folder.
 */
export function agentInstallRoot(executable: string): string {
  const real = realpathSync(executable);
  for (let dir = dirname(real); dirname(dir) !== dir; dir = dirname(dir)) {
    if (basename(dir) === 'node_modules') return dir;
  }
  return dirname(real);
}

/** The paths no agent may see: evaluation data and graders (`tasks/`), the store and every run (`$A2RL_HOME`). */
function forbiddenPaths(home: string): string[] {
  return [tasksRoot, home].map((path) => (existsSync(path) ? realpathSync(path) : resolve(path)));
}

/**
 * Refuses a folder the operator's agent needs (its installation, an --agent-bind) that lies in
 * or holds what agents never see; the launcher's own files for the run are not checked here.
 */
export function assertJailable(path: string, home: string): void {
  const real = existsSync(path) ? realpathSync(path) : resolve(path);
  for (const secret of forbiddenPaths(home)) {
    if (inside(real, secret) || inside(secret, real)) {
      throw new A2rlError(
        'FORBIDDEN',
        `The agent's jail cannot show ${path}: it ${inside(real, secret) ? 'lies in' : 'holds'} ${secret}, which agents never see. Install the agent, or put what it needs, elsewhere.`,
      );
    }
  }
  // A folder in the operator's home (an agent installed there) is fine; the home itself, or a folder holding it, is not.
  if (inside(realpathSync(homedir()), real)) {
    throw new A2rlError(
      'FORBIDDEN',
      `The agent's jail cannot show ${path}: it holds the operator's home ${homedir()}. Name a narrower folder.`,
    );
  }
}

/**
 * The agent CLI in a bubblewrap jail: the operating system read-only, its installation and
 * configuration read-only, its working folder and private HOME writable, its own /tmp, /proc
 * and /dev; nothing else of the host (no tasks, no store, no other run, no operator home).
 * The network is shared, so it reaches its model API and the loopback MCP endpoints; over
 * stdio its MCP server is the launcher's bridge socket. It runs in the caller's process
 * group (no new session), so the launcher's TERM and KILL of the group reach every process.
 */
export function jailCommand(spec: JailSpec): { command: string; args: string[] } {
  const readOnly = [...new Set(spec.readOnly.map((path) => resolve(path)))];
  const args = [
    '--unshare-all',
    '--share-net',
    '--die-with-parent',
    '--cap-drop',
    'ALL',
    '--uid',
    '1000',
    '--gid',
    '1000',
    '--hostname',
    'a2rl-agent',
    ...systemArgs(),
    ...networkFiles.flatMap((file) => ['--ro-bind-try', file, file]),
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    '--tmpfs',
    '/tmp',
    '--tmpfs',
    '/run',
  ];
  const node = realpathSync(process.execPath);
  if (!inside(node, '/usr')) args.push('--ro-bind', node, process.execPath);
  const binds: Array<[string, string, boolean]> = [
    ...readOnly.map((path): [string, string, boolean] => [path, path, true]),
    [spec.homeDir, spec.homeDir, false],
    [spec.workDir, spec.workDir, false],
  ];
  // Shallow paths first, so a deeper bind is not hidden under a later one.
  binds.sort((a, b) => a[1].split('/').length - b[1].split('/').length);
  for (const [source, target, ro] of binds) args.push(ro ? '--ro-bind' : '--bind', source, target);
  if (spec.socket) args.push('--bind', spec.socket, jailSocketPath);
  // An executable reached through a link outside what is bound (a bin folder of links) keeps its name: the link goes in too.
  const visible = [...readOnly, '/usr', '/bin', '/sbin', '/lib', '/lib64'];
  if (lstatSync(spec.command).isSymbolicLink() && !visible.some((path) => inside(spec.command, path))) {
    args.push('--symlink', realpathSync(spec.command), spec.command);
  }
  args.push('--setenv', 'HOME', spec.homeDir, '--setenv', 'TMPDIR', '/tmp', '--remount-ro', '/', '--chdir', spec.workDir);
  return { command: 'bwrap', args: [...args, '--', spec.command, ...spec.args] };
}
