import { dirname } from 'node:path';
import { A2rlError } from '../util/errors.js';
import { cliEntry } from '../util/paths.js';
import { agentKind, findExecutable, type McpEndpoint, mcpStartTimeout } from './agents.js';

/** The agents `a2rl agent-config` prints a configuration for: the CLIs a person also runs by hand. */
export const manualAgents = ['claude-code', 'codex', 'gemini-cli', 'opencode', 'qwen-code'];

export interface ManualConfigOptions {
  agent: string;
  /** The a2rl home the stdio server uses. */
  home: string;
  transport: 'stdio' | 'http';
  /** stdio: the task of the run the script's server makes, its budget and label. */
  task?: string;
  budget?: string;
  label?: string;
  /** http: the MCP URL of the `serve --http` that serves the run. */
  url?: string;
  /** The driver model, given to the CLI as `a2rl run --model` gives it. */
  model?: string;
}

// Placeholders in what the agent's invocation is built from, rendered as shell expansions.
const configDir = '@@A2RL_CONFIG@@';
const promptText = '@@A2RL_PROMPT@@';
const runToken = '@@A2RL_RUN_TOKEN@@';
const operatorArgs = '@@A2RL_ARGS@@';
const expansions: Record<string, string> = {
  [configDir]: '$config',
  [promptText]: '$prompt',
  [runToken]: '$A2RL_RUN_TOKEN',
};
const placeholders = new RegExp(Object.keys(expansions).join('|'), 'g');

/** A word for sh: placeholders expand, everything else is literal. */
function shellWord(word: string): string {
  if (word === operatorArgs) return '"$@"';
  if (Object.keys(expansions).some((name) => word.includes(name))) {
    const literal = (text: string) => text.replace(/[\\"$`]/g, '\\$&');
    let quoted = '';
    let at = 0;
    for (const match of word.matchAll(placeholders)) {
      quoted += literal(word.slice(at, match.index)) + expansions[match[0]];
      at = match.index + match[0].length;
    }
    return `"${quoted}${literal(word.slice(at))}"`;
  }
  if (/^[\w@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** JSON as the launcher writes it, with lists of names on one line each: shorter to read. */
function compactJson(content: string): string {
  return content.replace(/\[\n\s*("[^"\n]*"(?:,\n\s*"[^"\n]*")*)\n\s*\]/g, (_, items: string) => `[${items.split(/,\n\s*/).join(', ')}]`);
}

/** Command words, a flag and its value on one line. */
function commandLines(words: string[]): string[] {
  const lines: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const flagWithValue = words[i]!.startsWith('-') && i + 1 < words.length && !words[i + 1]!.startsWith('-');
    lines.push(flagWithValue ? `${words[i]} ${words[++i]}` : words[i]!);
  }
  return lines;
}

/** A file's path as the script writes it, and its content: a quoted heredoc unless it holds the run token. */
function heredoc(path: string, json: string): string {
  const content = path.endsWith('.json') ? compactJson(json) : json;
  const expands = content.includes(runToken);
  const body = expands ? content.replace(/[\\$`]/g, '\\$&').replaceAll(runToken, '$A2RL_RUN_TOKEN') : content;
  return `cat > ${shellWord(path)} <<${expands ? 'EOF' : "'EOF'"}\n${body}${body.endsWith('\n') ? '' : '\n'}EOF`;
}

/**
 * A shell script that runs one agent CLI on an a2rl run with exactly what `a2rl run` gives it
 * (the same command line, environment and configuration files, in a private HOME and a fresh
 * working folder), but not jailed: the CLI itself runs as the person who starts it.
 */
export function manualConfig(options: ManualConfigOptions): string {
  if (!manualAgents.includes(options.agent)) {
    throw new A2rlError(
      'INVALID_INPUT',
      `agent-config prints configurations for ${manualAgents.join(', ')}; a replay or a command agent reads $A2RL_MCP_CONFIG under a2rl run.`,
    );
  }
  const agent = agentKind(options.agent);
  // The CLI a2rl run would start (the operator's on PATH, else the one scripts/setup.sh installed), by its absolute path.
  const executable = findExecutable(agent)!;
  let endpoint: McpEndpoint;
  let serves: string;
  if (options.transport === 'http') {
    if (options.task || options.budget || options.label) {
      throw new A2rlError(
        'INVALID_INPUT',
        '--task, --budget and --label are for a run over stdio; over HTTP the run is the one a2rl runs create made: give its server with --url.',
      );
    }
    endpoint = { kind: 'http', url: options.url ?? 'http://127.0.0.1:8700/mcp', token: runToken };
    serves = `the run of $A2RL_RUN_TOKEN at ${endpoint.url}`;
  } else {
    if (!options.task)
      throw new A2rlError('INVALID_INPUT', 'Over stdio the script makes a new run: give its task with --task, e.g. --task micro-gsm8k.');
    if (options.url) throw new A2rlError('INVALID_INPUT', '--url is for --transport http; over stdio the CLI starts the server itself.');
    const serve = ['serve', '--task', options.task, '--label', options.label ?? options.agent];
    if (options.budget) serve.push('--budget', options.budget);
    endpoint = { kind: 'stdio', command: process.execPath, args: [cliEntry, '--home', options.home, ...serve] };
    serves = `a new run of ${options.task} over stdio`;
  }
  const invocation = agent.invocation({
    endpoint,
    prompt: promptText,
    model: options.model,
    agentDir: configDir,
    homeDir: `${configDir}/home`,
    extraArgs: [operatorArgs],
    // The script's server starts later, on a host not measured here: the least wait a2rl run gives.
    mcpStartTimeoutMs: mcpStartTimeout(0),
    told: agent.toldModel?.(executable, options.model),
  });
  const folders = [...new Set([`${configDir}/home`, `${configDir}/work`, ...invocation.files.map((file) => dirname(file.path))])].filter(
    (folder) => folder !== configDir,
  );
  const env = { HOME: `${configDir}/home`, ...invocation.env };
  return [
    '#!/bin/sh',
    `# ${agent.name} on ${serves}.`,
    '# What a2rl run gives it: only the a2rl tools, a private HOME (none of your settings, MCP servers or instruction',
    `# files), a fresh folder. NOT jailed: it runs as you. To benchmark, use a2rl run --agent ${agent.name}.`,
    '# Usage: A2RL_PROMPT=... sh THIS_FILE [arguments for the CLI, e.g. --model NAME]',
    'set -eu',
    ...(endpoint.kind === 'http' ? [': "${A2RL_RUN_TOKEN:?export A2RL_RUN_TOKEN=<the run token a2rl runs create printed>}"'] : []),
    `prompt=\${A2RL_PROMPT:-'Call read_instructions first: it gives the task, the rules and how you are graded.'}`,
    'config=$(mktemp -d)',
    `trap 'rm -rf "$config"' EXIT`,
    `mkdir -p ${folders.map(shellWord).join(' ')}`,
    ...invocation.files.map((file) => heredoc(file.path, file.content)),
    `cd ${shellWord(`${configDir}/work`)}`,
    [
      'env',
      ...Object.entries(env).map(([name, value]) => shellWord(`${name}=${value}`)),
      ...commandLines([shellWord(executable), ...invocation.args.map(shellWord)]),
    ].join(' \\\n  '),
    '',
  ].join('\n');
}
