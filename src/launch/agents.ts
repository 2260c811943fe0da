import { accessSync, constants, existsSync } from 'node:fs';
import { delimiter, join, resolve } from 'node:path';
import { A2rlError } from '../util/errors.js';
import { cliEntry } from '../util/paths.js';
import { loadReplay } from './replay.js';

/** Name of the MCP server in every agent's configuration; Claude Code names its tools `mcp__a2rl__<tool>`. */
export const serverName = 'a2rl';

/** How the agent reaches this server: it starts `a2rl serve --run` itself, or it connects over HTTP with the run token. */
export type McpEndpoint = { kind: 'stdio'; command: string; args: string[] } | { kind: 'http'; url: string; token: string };

/** What a launch gives an agent to build its command line from. */
export interface LaunchContext {
  endpoint: McpEndpoint;
  prompt: string;
  model?: string;
  /** The run's agent folder: configuration files go here. */
  agentDir: string;
}

/** A file the launcher writes before it starts the agent. */
export interface AgentFile {
  path: string;
  content: string;
}

export interface AgentInvocation {
  command: string;
  args: string[];
  /** Added to the launcher's environment (which carries the agent's API keys). */
  env: Record<string, string>;
  files: AgentFile[];
}

export interface AgentKind {
  /** What `--agent` names and what the run records. */
  name: string;
  /** The executable looked up on PATH; undefined for agents that bring their own command. */
  executable?: string;
  /** The npm package that installs the executable, named in the error when it is missing. */
  npmPackage?: string;
  /** How the agent writes its transcript on stdout, recorded with the run. */
  transcript: string;
  versionArgs?: string[];
  invocation(context: LaunchContext): AgentInvocation;
}

/** The `mcpServers` JSON that Claude Code, the replay agent and `command:` agents read. */
export function mcpServersJson(endpoint: McpEndpoint): string {
  const server =
    endpoint.kind === 'stdio'
      ? { type: 'stdio', command: endpoint.command, args: endpoint.args }
      : { type: 'http', url: endpoint.url, headers: { Authorization: `Bearer ${endpoint.token}` } };
  return `${JSON.stringify({ mcpServers: { [serverName]: server } }, null, 2)}\n`;
}

/** Claude Code's built-in tools, denied by name as well as left out with `--tools ""`, so no version's default slips through. */
const claudeBuiltinTools = [
  'Bash',
  'BashOutput',
  'KillShell',
  'Edit',
  'MultiEdit',
  'Write',
  'Read',
  'Glob',
  'Grep',
  'LS',
  'NotebookEdit',
  'NotebookRead',
  'WebFetch',
  'WebSearch',
  'Task',
  'TodoWrite',
  'SlashCommand',
  'Skill',
];

const claudeCode: AgentKind = {
  name: 'claude-code',
  executable: 'claude',
  npmPackage: '@anthropic-ai/claude-code',
  transcript: 'stream-json (one JSON event per line)',
  versionArgs: ['--version'],
  invocation: ({ endpoint, prompt, model, agentDir }) => {
    const config = join(agentDir, 'mcp.json');
    return {
      command: 'claude',
      args: [
        '-p',
        prompt,
        '--output-format',
        'stream-json',
        '--verbose',
        '--strict-mcp-config',
        '--mcp-config',
        config,
        '--tools',
        '',
        '--allowedTools',
        `mcp__${serverName}__*`,
        '--disallowedTools',
        claudeBuiltinTools.join(','),
        ...(model ? ['--model', model] : []),
      ],
      env: {},
      files: [{ path: config, content: mcpServersJson(endpoint) }],
    };
  },
};

/** A TOML value for Codex's `-c key=value` overrides (JSON strings and arrays are valid TOML). */
function toml(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(toml).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.entries(value)
      .map(([key, v]) => `${key}=${toml(v)}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Environment variable that carries the run token to Codex, which reads bearer tokens from the environment only. */
export const codexTokenVariable = 'A2RL_RUN_TOKEN';

const codex: AgentKind = {
  name: 'codex',
  executable: 'codex',
  npmPackage: '@openai/codex',
  transcript: 'exec --json (one JSON event per line)',
  versionArgs: ['--version'],
  invocation: ({ endpoint, prompt, model }): AgentInvocation => {
    const server =
      endpoint.kind === 'stdio'
        ? { command: endpoint.command, args: endpoint.args, startup_timeout_sec: 60, tool_timeout_sec: 120 }
        : { url: endpoint.url, bearer_token_env_var: codexTokenVariable, startup_timeout_sec: 60, tool_timeout_sec: 120 };
    // Setting the whole mcp_servers table replaces the user's servers: only this one is configured.
    const overrides = {
      mcp_servers: { [serverName]: server },
      'features.shell_tool': false,
      'features.unified_exec': false,
      include_apply_patch_tool: false,
      'tools.web_search': false,
      'tools.view_image': false,
      approval_policy: 'never',
    };
    return {
      command: 'codex',
      args: [
        'exec',
        '--json',
        '--skip-git-repo-check',
        '--sandbox',
        'read-only',
        ...Object.entries(overrides).flatMap(([key, value]) => ['-c', `${key}=${toml(value)}`]),
        ...(model ? ['--model', model] : []),
        prompt,
      ],
      env: endpoint.kind === 'http' ? { [codexTokenVariable]: endpoint.token } : {},
      files: [],
    };
  },
};

/** Gemini CLI's built-in tools, excluded so that only this server's tools remain. */
const geminiBuiltinTools = [
  'run_shell_command',
  'write_file',
  'replace',
  'read_file',
  'read_many_files',
  'list_directory',
  'glob',
  'search_file_content',
  'web_fetch',
  'google_web_search',
  'save_memory',
  'write_todos',
];

const geminiCli: AgentKind = {
  name: 'gemini-cli',
  executable: 'gemini',
  npmPackage: '@google/gemini-cli',
  transcript: 'stream-json (one JSON event per line)',
  versionArgs: ['--version'],
  invocation: ({ endpoint, prompt, model, agentDir }) => {
    const settings = join(agentDir, 'gemini-settings.json');
    const server =
      endpoint.kind === 'stdio'
        ? { command: endpoint.command, args: endpoint.args, trust: true, timeout: 120_000 }
        : { httpUrl: endpoint.url, headers: { Authorization: `Bearer ${endpoint.token}` }, trust: true, timeout: 120_000 };
    const content = {
      mcpServers: { [serverName]: server },
      mcp: { allowed: [serverName] },
      tools: { exclude: geminiBuiltinTools },
    };
    return {
      command: 'gemini',
      args: [
        '-p',
        prompt,
        '--output-format',
        'stream-json',
        '--approval-mode',
        'yolo',
        '--allowed-mcp-server-names',
        serverName,
        ...(model ? ['--model', model] : []),
      ],
      // The system settings file overrides user and workspace settings, and needs no trusted folder.
      env: { GEMINI_CLI_SYSTEM_SETTINGS_PATH: settings },
      files: [{ path: settings, content: `${JSON.stringify(content, null, 2)}\n` }],
    };
  },
};

/** Environment a `command:` agent and the replay agent read: where the MCP configuration and the prompt are. */
function commonEnv(context: LaunchContext, config: string): Record<string, string> {
  const env: Record<string, string> = { A2RL_MCP_CONFIG: config, A2RL_PROMPT: context.prompt };
  if (context.endpoint.kind === 'http') Object.assign(env, { A2RL_MCP_URL: context.endpoint.url, A2RL_RUN_TOKEN: context.endpoint.token });
  if (context.model) env.A2RL_MODEL = context.model;
  return env;
}

function replayAgent(file: string): AgentKind {
  const replay = resolve(file);
  if (!existsSync(replay))
    throw new A2rlError('NOT_FOUND', `No replay file at ${replay}; give replay:FILE a JSONL replay (see README, Replays).`);
  // A replay that cannot be read is refused now, not after its run was made.
  loadReplay(replay);
  return {
    name: 'replay',
    transcript: 'one line per replayed tool call',
    invocation: (context) => {
      const config = join(context.agentDir, 'mcp.json');
      return {
        command: process.execPath,
        args: [cliEntry, 'replay', replay, '--mcp-config', config],
        env: commonEnv(context, config),
        files: [{ path: config, content: mcpServersJson(context.endpoint) }],
      };
    },
  };
}

function commandAgent(command: string): AgentKind {
  return {
    name: 'command',
    transcript: "the command's standard output",
    invocation: (context) => {
      const config = join(context.agentDir, 'mcp.json');
      return {
        command: '/bin/sh',
        args: ['-c', command],
        env: commonEnv(context, config),
        files: [{ path: config, content: mcpServersJson(context.endpoint) }],
      };
    },
  };
}

const builtinAgents = [claudeCode, codex, geminiCli];

/** The agent `--agent` names: claude-code, codex, gemini-cli, replay:FILE or command:'…'. */
export function agentKind(spec: string): AgentKind {
  if (spec.startsWith('replay:') && spec.length > 'replay:'.length) return replayAgent(spec.slice('replay:'.length));
  if (spec.startsWith('command:') && spec.trim().length > 'command:'.length) return commandAgent(spec.slice('command:'.length));
  const agent = builtinAgents.find((candidate) => candidate.name === spec);
  if (!agent) {
    throw new A2rlError(
      'INVALID_INPUT',
      `Unknown agent "${spec}". Use one of ${builtinAgents.map((a) => a.name).join(', ')}, replay:FILE (a replay JSONL) or command:'…' (any command that reads $A2RL_MCP_CONFIG).`,
    );
  }
  return agent;
}

/** The agent's executable on PATH, or a clear error naming the package to install; agents are never installed here. */
export function findExecutable(agent: AgentKind, path = process.env.PATH ?? ''): string | undefined {
  if (!agent.executable) return undefined;
  for (const dir of path.split(delimiter).filter(Boolean)) {
    const candidate = join(dir, agent.executable);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not in this folder.
    }
  }
  throw new A2rlError(
    'NOT_FOUND',
    `${agent.name} is not installed: no "${agent.executable}" on PATH. Install it with npm install -g ${agent.npmPackage} (and sign it in), then run this again; a2rl does not install agents.`,
  );
}
