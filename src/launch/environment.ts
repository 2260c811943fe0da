import { A2rlError } from '../util/errors.js';

/** What every agent gets of the launcher's environment: where programs are, the locale, the terminal. */
const baseVariables = ['PATH', 'LANG', 'LANGUAGE', 'LC_*', 'TERM', 'COLORTERM', 'NO_COLOR', 'TZ'];

/** a2rl's own variables (the admin token, the judge's key, the home) never enter a jail, whatever the operator names. */
const a2rlPrefix = 'A2RL_';

/**
 * Checks a name `--agent-env` passes on: a variable name, or a prefix ending in `*` (`AWS_*`);
 * a2rl's own variables are refused (a prefix that would match them still never passes them).
 */
export function checkAgentEnvName(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*\*?$/.test(name)) {
    throw new A2rlError('INVALID_INPUT', `--agent-env takes a variable name (HTTPS_PROXY) or a prefix ending in * (AWS_*), not "${name}".`);
  }
  if (name.toUpperCase().startsWith(a2rlPrefix)) {
    throw new A2rlError(
      'FORBIDDEN',
      `--agent-env ${name}: a2rl's own variables (${a2rlPrefix}*: the admin token, the judge's key) never enter the agent's jail; the launcher gives the agent what it needs of them.`,
    );
  }
  return name;
}

const matches = (name: string, pattern: string) => (pattern.endsWith('*') ? name.startsWith(pattern.slice(0, -1)) : name === pattern);

/**
 * The agent's environment, an allow-list of the launcher's: PATH, locale and terminal, the
 * variables of its own kind (its model provider's credentials and settings), and the names
 * the operator gave with --agent-env. Nothing else: no a2rl token or key, no other secret.
 */
export function agentEnvironment(
  agentVariables: readonly string[],
  operatorNames: readonly string[],
  env = process.env,
): Record<string, string> {
  const allowed = [...baseVariables, ...agentVariables, ...operatorNames.map(checkAgentEnvName)];
  const passed: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || name.toUpperCase().startsWith(a2rlPrefix)) continue;
    if (allowed.some((pattern) => matches(name, pattern))) passed[name] = value;
  }
  return passed;
}

/** The environment of the servers the launcher starts for its agents: the launcher's, without the admin token that creates runs. */
export function serverEnvironment(env = process.env): NodeJS.ProcessEnv {
  const { A2RL_ADMIN_TOKEN: _admin, ...rest } = env;
  return rest;
}
