import { existsSync, lchownSync, lstatSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { asRoot, dropTo, parentFolders, systemArgs } from '../../sandbox/bwrap.js';
import { giveFolders, type JobIdentity, jobIdentity } from '../../sandbox/job-identity.js';
import { A2rlError } from '../util/errors.js';
import { packageRoot, tasksRoot } from '../util/paths.js';
import { type Forward, jailNetworkDir } from './jail-network.js';

/** Where the launcher's MCP bridge socket appears inside the jail (a short path: sockets have a 108-byte limit). */
export const jailSocketPath = '/run/a2rl/mcp.sock';

/** The jail's first process (`src/launch/forwarder.ts`, built): it forwards the agent's endpoints into the jail, then runs the agent. */
export const forwarderEntry = join(packageRoot, 'dist', 'src', 'launch', 'forwarder.js');

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
  /** The jail's network (`startJailNetwork`): its sockets' host folder, bound at `jailNetworkDir`, and the forwards the forwarder listens for. */
  network: { dir: string; forwards: Forward[] };
  /** Where the launcher is root: the unprivileged host uid the jail's processes run as (`agentIdentity`), given what they use (`giveJail`). */
  identity?: JobIdentity;
}

/**
 * The host uid and gid a launched run's agent runs as where the launcher is root: its own, apart from its run's jobs'
 * (a job cannot touch the agent's files, nor the agent the job's). Undefined when the launcher is not root.
 */
export function agentIdentity(runId: string): JobIdentity | undefined {
  return jobIdentity(`agent:${runId}`);
}

/**
 * Gives the agent's uid what its jail writes and connects to, before the jail starts: its working folder and HOME
 * (with what the launcher wrote there), its configuration files elsewhere (`files`, bound read-only), and the
 * sockets bound into the jail with their folder (a connect needs write permission on the socket, search on its folder).
 */
export function giveJail(spec: JailSpec & { identity: JobIdentity }, files: string[]): void {
  giveFolders([spec.workDir, spec.homeDir], spec.identity);
  const sockets = readdirSync(spec.network.dir).map((name) => join(spec.network.dir, name));
  for (const path of [...files, ...(spec.socket ? [spec.socket] : []), spec.network.dir, ...sockets]) {
    lchownSync(path, spec.identity.uid, spec.identity.gid);
  }
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

/**
 * What of this package no agent may read, wherever a folder it is shown holds it: the tasks (graders, evaluation data)
 * and the checkout's git folder, whose objects hold every version of them (`git show HEAD:tasks/…`); for a worktree,
 * its git folder and the common one its `commondir` names. Found once: the package does not move.
 */
let secretsFound: string[] | undefined;
function packageSecrets(): string[] {
  return (secretsFound ??= findPackageSecrets());
}

function findPackageSecrets(): string[] {
  const secrets = [tasksRoot];
  const git = join(packageRoot, '.git');
  const stat = lstatSync(git, { throwIfNoEntry: false });
  if (stat?.isDirectory()) secrets.push(git);
  else if (stat?.isFile()) {
    const gitDir = /^gitdir: (.+)$/m.exec(readFileSync(git, 'utf8'))?.[1]?.trim();
    if (gitDir) {
      const absolute = resolve(packageRoot, gitDir);
      secrets.push(absolute);
      const common = join(absolute, 'commondir');
      if (existsSync(common)) secrets.push(resolve(absolute, readFileSync(common, 'utf8').trim()));
    }
  }
  return secrets.filter((path) => existsSync(path)).map((path) => realpathSync(path));
}

/** The paths no agent may see: the package's secrets ({@link packageSecrets}), the store and every run (`$A2RL_HOME`). */
function forbiddenPaths(home: string): { secrets: string[]; store: string } {
  return { secrets: packageSecrets(), store: existsSync(home) ? realpathSync(home) : resolve(home) };
}

/**
 * Refuses a folder the operator's agent needs (its installation, an --agent-bind) that lies in or holds what agents
 * never see; the launcher's own files for the run are not checked here. A folder holding `tasks/` (a checkout of this
 * package, `--agent-bind .`) is shown with `tasks/` and its git folder masked (`jailCommand`); one holding the store
 * cannot be, since the
 * run's own folders lie there.
 */
export function assertJailable(path: string, home: string): void {
  const real = existsSync(path) ? realpathSync(path) : resolve(path);
  const { secrets, store } = forbiddenPaths(home);
  for (const secret of [...secrets, store]) {
    if (inside(real, secret)) {
      throw new A2rlError(
        'FORBIDDEN',
        `The agent's jail cannot show ${path}: it lies in ${secret}, which agents never see. Install the agent, or put what it needs, elsewhere.`,
      );
    }
  }
  if (inside(store, real)) {
    throw new A2rlError(
      'FORBIDDEN',
      `The agent's jail cannot show ${path}: it holds the store ${store}, which agents never see. Bind a narrower folder, or keep the home (--home, $A2RL_HOME) outside it.`,
    );
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
 * Where the package's secrets appear inside the jail under each folder it shows (its read-only binds, and the system's
 * `/usr`, where a global install puts the package): masked there by an empty, read-only tmpfs.
 */
export function maskedPackageSecrets(readOnly: string[]): string[] {
  const secrets = packageSecrets();
  const masks = [...readOnly, '/usr'].flatMap((path) => {
    const real = existsSync(path) ? realpathSync(path) : path;
    return secrets.filter((secret) => secret !== real && inside(secret, real)).map((secret) => join(path, relative(real, secret)));
  });
  return [...new Set(masks)];
}

/**
 * The agent CLI in a bubblewrap jail: the operating system read-only, its installation and
 * configuration read-only, its working folder and private HOME writable, its own /tmp, /proc
 * and /dev; nothing else of the host (no tasks and no git folder of this package: under a shown folder holding them,
 * an empty tmpfs; no store, no other run, no operator home).
 * Its network is its own, only a loopback: the forwarder, its first process, listens there on the
 * addresses of the endpoints it was given (its model API, its run's HTTP endpoint, the launcher's
 * proxy) and joins each to a socket of the launcher's; nothing else of the host's network is
 * reachable. Over stdio its MCP server is the launcher's bridge socket. It runs in the caller's process
 * group (no new session), so the launcher's TERM and KILL of the group reach every process.
 * A root launcher's jail is set up as a root job sandbox is (`bubblewrapArgs`): no user namespace (it would map the
 * agent to host root), and its first process drops to `spec.identity` through setpriv.
 */
export function jailCommand(spec: JailSpec): { command: string; args: string[] } {
  const readOnly = [...new Set(spec.readOnly.map((path) => resolve(path)))];
  const identity = spec.identity;
  const binds: Array<[string, string, boolean]> = [
    ...readOnly.map((path): [string, string, boolean] => [path, path, true]),
    [spec.homeDir, spec.homeDir, false],
    [spec.workDir, spec.workDir, false],
  ];
  // Shallow paths first, so a deeper bind is not hidden under a later one.
  binds.sort((a, b) => a[1].split('/').length - b[1].split('/').length);
  // A root bwrap makes the folders above a mount point 0700: made first (after the tmpfs mounts, since the run's
  // folders may lie in /tmp), open, so the dropped agent reaches its mounts.
  const targets = [...networkFiles, ...binds.map((bind) => bind[1]), process.execPath, forwarderEntry, spec.command, jailSocketPath];
  const args = [
    ...(identity ? asRoot : ['--unshare-all', '--cap-drop', 'ALL', '--uid', '1000', '--gid', '1000']),
    '--die-with-parent',
    '--hostname',
    'a2rl-agent',
    '--proc',
    '/proc',
    // Host-global kernel settings (kernel.core_pattern): read-only whatever the agent's uid; bwrap leaves /proc/sys writable.
    '--ro-bind',
    '/proc/sys',
    '/proc/sys',
    '--dev',
    '/dev',
    // Made by bwrap as its own uid: writable by everyone (sticky), so a dropped agent can use it.
    '--perms',
    '1777',
    '--tmpfs',
    '/tmp',
    '--tmpfs',
    '/run',
    ...(identity ? parentFolders(targets, true).flatMap((dir) => ['--perms', '0755', '--dir', dir]) : []),
    ...systemArgs(),
    ...networkFiles.flatMap((file) => ['--ro-bind-try', file, file]),
  ];
  const node = realpathSync(process.execPath);
  if (!inside(node, '/usr')) args.push('--ro-bind', node, process.execPath);
  for (const [source, target, ro] of binds) args.push(ro ? '--ro-bind' : '--bind', source, target);
  // After every bind: a bind under a secret (none is allowed) would be hidden too, never shown over the mask.
  for (const mask of maskedPackageSecrets(readOnly)) args.push('--perms', '0555', '--tmpfs', mask, '--remount-ro', mask);
  if (spec.socket) args.push('--bind', spec.socket, jailSocketPath);
  args.push('--ro-bind', spec.network.dir, jailNetworkDir, '--ro-bind', forwarderEntry, forwarderEntry);
  // An executable reached through a link outside what is bound (a bin folder of links) keeps its name: the link goes in too.
  const visible = [...readOnly, '/usr', '/bin', '/sbin', '/lib', '/lib64'];
  if (lstatSync(spec.command).isSymbolicLink() && !visible.some((path) => inside(spec.command, path))) {
    args.push('--symlink', realpathSync(spec.command), spec.command);
  }
  args.push('--setenv', 'HOME', spec.homeDir, '--setenv', 'TMPDIR', '/tmp', '--remount-ro', '/', '--chdir', spec.workDir);
  return {
    command: 'bwrap',
    args: [
      ...args,
      '--',
      ...(identity ? dropTo(identity) : []),
      process.execPath,
      forwarderEntry,
      JSON.stringify(spec.network.forwards),
      '--',
      spec.command,
      ...spec.args,
    ],
  };
}
