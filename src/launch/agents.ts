import { accessSync, constants, existsSync } from 'node:fs';
import { delimiter, join, resolve } from 'node:path';
import type { ModelActivity } from '../transcripts/model-activity.js';
import type { TranscriptText } from '../transcripts/json-lines.js';
import { claudeCodeTranscript } from '../transcripts/readers/claude-code.js';
import { codexTranscript } from '../transcripts/readers/codex.js';
import { geminiCliTranscript } from '../transcripts/readers/gemini-cli.js';
import { A2rlError } from '../util/errors.js';
import { cliEntry, packageRoot } from '../util/paths.js';
import { loadReplay, replayWithFilesInlined } from './replay.js';

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
  /** The agent's private HOME in its jail, prepared by the launcher: user-level configuration goes here. */
  homeDir: string;
  /** The operator's own arguments for the agent (`--agent-arg`), after the launcher's and before a positional prompt. */
  extraArgs: string[];
}

/** A file the launcher writes before it starts the agent. */
export interface AgentFile {
  path: string;
  content: string;
}

export interface AgentInvocation {
  command: string;
  args: string[];
  /** Added to what the agent gets of the launcher's environment (its kind's `environment`, its API keys). */
  env: Record<string, string>;
  files: AgentFile[];
  /** Host paths the agent reads beside its installation, shown read-only in its jail. */
  readOnly?: string[];
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
  /** The launcher's variables the agent gets beside PATH, locale and terminal: its provider's credentials and settings (`NAME` or `PREFIX_*`). */
  environment: readonly string[];
  /** Its provider's hosted API, which its jail's proxy lets it reach on 443 beside the URLs it was given. */
  apiHosts?: readonly string[];
  invocation(context: LaunchContext): AgentInvocation;
  /** Whether its model completed a turn, read from its transcript (and stderr); undefined for agents without a model (replays, commands). */
  modelActivity?(transcript: TranscriptText, stderr: string): ModelActivity;
}

export type { ModelActivity };

/** The `mcpServers` JSON that Claude Code, the replay agent and `command:` agents read. */
export function mcpServersJson(endpoint: McpEndpoint): string {
  const server =
    endpoint.kind === 'stdio'
      ? { type: 'stdio', command: endpoint.command, args: endpoint.args }
      : { type: 'http', url: endpoint.url, headers: { Authorization: `Bearer ${endpoint.token}` } };
  return `${JSON.stringify({ mcpServers: { [serverName]: server } }, null, 2)}\n`;
}

/**
 * Claude Code's built-in tools (version 2.1.332, read from its first request without `--tools ""`),
 * denied by name as well as left out with `--tools ""`.
 */
const claudeBuiltinTools = [
  'Agent',
  'Bash',
  'CronCreate',
  'CronDelete',
  'CronList',
  'Edit',
  'EnterWorktree',
  'ExitWorktree',
  'ListAgents',
  'Monitor',
  'NotebookEdit',
  'Read',
  'ReportFindings',
  'ScheduleWakeup',
  'SendMessage',
  'Skill',
  'TaskStop',
  'WebFetch',
  'WebSearch',
  'Workflow',
  'Write',
];

const claudeCode: AgentKind = {
  name: 'claude-code',
  executable: 'claude',
  npmPackage: '@anthropic-ai/claude-code',
  transcript: 'stream-json (one JSON event per line)',
  versionArgs: ['--version'],
  environment: ['ANTHROPIC_*', 'CLAUDE_CODE_*'],
  apiHosts: ['api.anthropic.com'],
  // Read by the transcripts package, which reads the rest of its transcript too.
  modelActivity: claudeCodeTranscript.modelActivity,
  invocation: ({ endpoint, prompt, model, agentDir, extraArgs }) => {
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
        // No user, project or local settings, hooks or CLAUDE.md: every agent gets the same prompt.
        '--setting-sources',
        '',
        '--tools',
        '',
        '--allowedTools',
        `mcp__${serverName}__*`,
        '--disallowedTools',
        claudeBuiltinTools.join(','),
        ...(model ? ['--model', model] : []),
        ...extraArgs,
      ],
      env: {
        // In -p mode Claude Code does not wait for MCP servers unless told to: a slow server meant a run without tools.
        MCP_CONNECTION_NONBLOCKING: '0',
        MCP_CONNECT_TIMEOUT_MS: '60000',
        CLAUDE_CODE_DISABLE_CLAUDE_MDS: '1',
        // Every tool offered up front: no deferred-loading placeholder among the tools.
        ENABLE_TOOL_SEARCH: 'false',
        DISABLE_AUTOUPDATER: '1',
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      },
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
  environment: ['OPENAI_*', 'CODEX_*'],
  apiHosts: ['api.openai.com'],
  modelActivity: codexTranscript.modelActivity,
  invocation: ({ endpoint, prompt, model, homeDir, extraArgs }): AgentInvocation => {
    const timeouts = { startup_timeout_sec: 60, tool_timeout_sec: 120 };
    // required: Codex waits for the server and fails without it; approve: write tools are not refused under approval "never".
    const server = {
      ...(endpoint.kind === 'stdio'
        ? { command: endpoint.command, args: endpoint.args }
        : { url: endpoint.url, bearer_token_env_var: codexTokenVariable }),
      ...timeouts,
      required: true,
      default_tools_approval_mode: 'approve',
    };
    const overrides = {
      [`mcp_servers.${serverName}`]: server,
      'features.shell_tool': false,
      'features.unified_exec': false,
      'features.view_image': false,
      'features.multi_agent': false,
      'features.goals': false,
      web_search: 'disabled',
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
        ...extraArgs,
        prompt,
      ],
      // Its own configuration folder in the private HOME: none of the user's MCP servers, AGENTS.md or profiles.
      env: { CODEX_HOME: join(homeDir, '.codex'), ...(endpoint.kind === 'http' ? { [codexTokenVariable]: endpoint.token } : {}) },
      files: [{ path: join(homeDir, '.codex', 'config.toml'), content: '# a2rl run: the configuration is on the command line.\n' }],
    };
  },
};

/**
 * Gemini CLI's built-in tools, excluded by class name: excluding by tool name would hide
 * this server's own read_file and write_file, which share Gemini's names.
 */
const geminiBuiltinTools = [
  'ShellTool',
  'ReadFileTool',
  'WriteFileTool',
  'EditTool',
  'GlobTool',
  'GrepTool',
  'RipGrepTool',
  'LSTool',
  'ReadManyFilesTool',
  'WebFetchTool',
  'WebSearchTool',
  'MemoryTool',
  'WriteTodosTool',
  'ActivateSkillTool',
  'AskUserTool',
  'GetInternalDocsTool',
  'ListBackgroundProcessesTool',
  'ReadBackgroundOutputTool',
  'EnterPlanModeTool',
  'ExitPlanModeTool',
  'TrackerAddDependencyTool',
  'TrackerCreateTaskTool',
  'TrackerGetTaskTool',
  'TrackerListTasksTool',
  'TrackerUpdateTaskTool',
  'TrackerVisualizeTool',
  'AgentTool',
  'UpdateTopicTool',
];

const geminiCli: AgentKind = {
  name: 'gemini-cli',
  executable: 'gemini',
  npmPackage: '@google/gemini-cli',
  transcript: 'stream-json (one JSON event per line)',
  versionArgs: ['--version'],
  environment: ['GEMINI_*', 'GOOGLE_*'],
  apiHosts: ['generativelanguage.googleapis.com'],
  modelActivity: geminiCliTranscript.modelActivity,
  invocation: ({ endpoint, prompt, model, homeDir, extraArgs }) => {
    // User settings in the private HOME: read whoever owns them (a system settings file is skipped unless root owns it and every folder above it).
    const settings = join(homeDir, '.gemini', 'settings.json');
    const server =
      endpoint.kind === 'stdio'
        ? { command: endpoint.command, args: endpoint.args, trust: true, timeout: 120_000 }
        : { httpUrl: endpoint.url, headers: { Authorization: `Bearer ${endpoint.token}` }, trust: true, timeout: 120_000 };
    const content = {
      mcpServers: { [serverName]: server },
      mcp: { allowed: [serverName] },
      tools: { exclude: geminiBuiltinTools },
      // In the jail only an API key can sign in ($GEMINI_API_KEY).
      security: { auth: { selectedType: 'gemini-api-key' } },
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
        ...extraArgs,
      ],
      // Without it Gemini CLI exits 55 in a fresh working folder ("not running in a trusted directory").
      env: { GEMINI_CLI_TRUST_WORKSPACE: 'true' },
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
  const steps = loadReplay(replay);
  return {
    name: 'replay',
    transcript: 'one line per replayed tool call',
    environment: [],
    invocation: (context) => {
      const config = join(context.agentDir, 'mcp.json');
      // The jail shows the replay player (a2rl's own code) and a copy of the replay with its files inlined.
      const copy = join(context.agentDir, 'replay.jsonl');
      return {
        command: process.execPath,
        args: [cliEntry, 'replay', copy, '--mcp-config', config],
        env: commonEnv(context, config),
        files: [
          { path: config, content: mcpServersJson(context.endpoint) },
          { path: copy, content: replayWithFilesInlined(steps) },
        ],
        readOnly: [join(packageRoot, 'dist'), join(packageRoot, 'node_modules'), join(packageRoot, 'package.json')],
      };
    },
  };
}

function commandAgent(command: string): AgentKind {
  return {
    name: 'command',
    transcript: "the command's standard output",
    // Its model provider's variables, if any, the operator names with --agent-env.
    environment: [],
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

/** Where `scripts/setup.sh` installs the agent CLIs at their tested versions (`npm install --prefix .agents`). */
export const setupAgentsBin = join(packageRoot, '.agents', 'node_modules', '.bin');

/**
 * The agent's executable: the operator's own on PATH first, else the one `scripts/setup.sh`
 * installed; a clear error naming the package to install when there is neither.
 */
export function findExecutable(agent: AgentKind, path = process.env.PATH ?? '', setupBin = setupAgentsBin): string | undefined {
  if (!agent.executable) return undefined;
  for (const dir of [...path.split(delimiter).filter(Boolean), setupBin]) {
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
    `${agent.name} is not installed: no "${agent.executable}" on PATH. Install it with npm install -g ${agent.npmPackage} (or run scripts/setup.sh), then run this again.`,
  );
}
