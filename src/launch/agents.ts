import { execFileSync } from 'node:child_process';
import { accessSync, constants, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import type { ModelActivity } from '../transcripts/model-activity.js';
import type { TranscriptText } from '../transcripts/json-lines.js';
import { claudeCodeTranscript } from '../transcripts/readers/claude-code.js';
import { codexTranscript } from '../transcripts/readers/codex.js';
import { geminiCliTranscript } from '../transcripts/readers/gemini-cli.js';
import { openCodeTranscript } from '../transcripts/readers/opencode.js';
import { openHandsStatsLines, openHandsTranscript } from '../transcripts/readers/openhands.js';
import { qwenCodeTranscript } from '../transcripts/readers/qwen-code.js';
import { A2rlError } from '../util/errors.js';
import { cliEntry, packageRoot } from '../util/paths.js';
import { agentInstallRoot } from './jail.js';
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
  /**
   * How long the agent waits for its MCP server to start and list its tools, in ms (`mcpStartTimeout`): without
   * enough, a CLI starts with no tools at all on a loaded host.
   */
  mcpStartTimeoutMs: number;
  /** What the agent's `toldModel` resolved for this launch, once, before any run; undefined for an agent without one. */
  told?: ToldModel;
}

/** The model a launch tells its agent to drive, resolved once per launch from its executable (`AgentKind.toldModel`). */
export interface ToldModel {
  /** Its id: the operator's `--model`, else the default the launcher names for the agent, which the run records. */
  model: string;
  /** Its entry for the agent's model catalog, where the launcher gives it one (Codex's: the a2rl tools as tools of their own). */
  catalogEntry?: Record<string, unknown>;
}

/**
 * The agent's wait for its MCP server: three times the server's start as measured on this host now, plus a minute,
 * and never under two minutes. A CLI's default (about 30 s) is less than a loaded host's server takes.
 */
export function mcpStartTimeout(measuredStartMs: number): number {
  return Math.max(120_000, Math.ceil(3 * measuredStartMs) + 60_000);
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
  /** How to install an executable that no npm package brings, named in the error when it is missing. */
  install?: string;
  /** Where its launcher was only tested against a stand-in, what `a2rl run --help` and the docs say of it. */
  untested?: string;
  /** How the agent writes its transcript on stdout, recorded with the run. */
  transcript: string;
  versionArgs?: string[];
  /** The launcher's variables the agent gets beside PATH, locale and terminal: its provider's credentials and settings (`NAME` or `PREFIX_*`). */
  environment: readonly string[];
  /** Its provider's hosted API, which its jail's proxy lets it reach on 443 beside the URLs it was given. */
  apiHosts?: readonly string[];
  /**
   * The `--agent-arg` that names its model, if any: refused, since it would override the model the launcher gives
   * it (`--model`, or the default it names) and the run would record the wrong one.
   */
  modelArgument?(args: readonly string[]): string | undefined;
  /**
   * The model it is told, read from its executable once per launch before any run exists (beside its version): a
   * throw refuses the launch with nothing made, where the same failure in `invocation` would leave a run open. Each
   * of the launch's invocations gets it (`LaunchContext.told`).
   */
  toldModel?(executable: string, model: string | undefined): ToldModel;
  invocation(context: LaunchContext): AgentInvocation;
  /** Whether its model completed a turn, read from its transcript (and stderr); undefined for agents without a model (replays, commands). */
  modelActivity?(transcript: TranscriptText, stderr: string): ModelActivity;
  /**
   * What its transcript reader needs of the files the agent wrote in its HOME rather than on stdout, as lines the
   * launcher appends to the saved transcript once the agent exited (OpenHands: its conversation's token and dollar totals).
   */
  transcriptTrailer?(homeDir: string): string;
}

export type { ModelActivity };

/** The first of `args` that is one of the `options` naming a model, alone (`--model X`) or with its value (`--model=X`). */
function optionIn(args: readonly string[], options: readonly string[]): string | undefined {
  return args.find((arg) => options.some((option) => arg === option || arg.startsWith(`${option}=`)));
}

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
  modelArgument: (args) => optionIn(args, ['--model']),
  invocation: ({ endpoint, prompt, model, agentDir, extraArgs, mcpStartTimeoutMs }) => {
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
        // Its wait to connect, and its wait for the server to start (tools/list included): 30 s by default.
        MCP_CONNECT_TIMEOUT_MS: String(mcpStartTimeoutMs),
        MCP_TIMEOUT: String(mcpStartTimeoutMs),
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

/** Environment variable that carries the run token to Codex and OpenCode, which read it from their environment (not from a file). */
export const runTokenVariable = 'A2RL_RUN_TOKEN';

/** A model of Codex's catalog, as `codex debug models` prints it: the fields a2rl reads or overrides. */
interface CodexModel {
  slug: string;
  visibility?: string;
  priority?: number;
  [field: string]: unknown;
}

const bundledCodexCatalogs = new Map<string, CodexModel[]>();

/** The model catalog built into this Codex (`codex debug models --bundled`: no refresh, no network), read once per executable. */
function bundledCodexModels(executable: string): CodexModel[] {
  let models = bundledCodexCatalogs.get(executable);
  if (!models) {
    // Its own throwaway CODEX_HOME: the command opens its state databases there.
    const codexHome = mkdtempSync(join(tmpdir(), 'a2rl-codex-catalog-'));
    try {
      const printed = execFileSync(executable, ['debug', 'models', '--bundled'], {
        env: { ...process.env, CODEX_HOME: codexHome },
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
        maxBuffer: 64 * 1024 * 1024,
        // It reads a file built into the executable: a hung one is broken, not slow.
        timeout: 30_000,
      });
      models = (JSON.parse(printed) as { models: CodexModel[] }).models;
    } catch (error) {
      throw new A2rlError(
        'NOT_FOUND',
        `Cannot read the model catalog of ${executable} (debug models --bundled: ${(error as Error).message.split('\n')[0]}): reinstall Codex (scripts/setup.sh installs the tested version).`,
      );
    } finally {
      rmSync(codexHome, { recursive: true, force: true });
    }
    bundledCodexCatalogs.set(executable, models);
  }
  return models;
}

/**
 * The model Codex runs, and the catalog entry a2rl gives it. Codex's catalog shapes a model's tools: its models'
 * `tool_mode: "code_mode_only"` nests every MCP tool in a JavaScript `exec` tool (no feature switch undoes it), other
 * fields add built-ins no switch removes (apply_patch, multi-agent and clock tools) or hide the MCP tools behind a
 * `tool_search` tool. The entry keeps the model's identity, instructions and limits, and offers tools the way Codex
 * does for a model it has no entry for: the a2rl tools first-class, as function tools of their own, in the request's
 * `tools`. With no `--model`, Codex's default (the catalog's first listed model) is named explicitly, so the run
 * records it. A model the catalog does not know gets no entry: its tools are already plain.
 */
export function codexModelEntry(executable: string, model: string | undefined): ToldModel {
  const models = bundledCodexModels(executable);
  const listed = models.filter((m) => m.visibility === 'list').sort((a, b) => (a.priority ?? Infinity) - (b.priority ?? Infinity));
  const known = model === undefined ? listed[0] : models.find((m) => m.slug === model);
  if (!known) {
    if (model === undefined) throw new A2rlError('NOT_FOUND', `${executable} lists no model in its catalog: name one with --model.`);
    return { model };
  }
  const catalogEntry = {
    ...known,
    tool_mode: null,
    use_responses_lite: false,
    apply_patch_tool_type: null,
    multi_agent_version: null,
    experimental_supported_tools: [],
    supports_search_tool: false,
  };
  return { model: known.slug, catalogEntry };
}

const codex: AgentKind = {
  name: 'codex',
  executable: 'codex',
  npmPackage: '@openai/codex',
  transcript: 'exec --json (one JSON event per line)',
  versionArgs: ['--version'],
  environment: ['OPENAI_*', 'CODEX_*'],
  apiHosts: ['api.openai.com'],
  modelActivity: codexTranscript.modelActivity,
  // Its model from `-m`/`--model`, or from a `-c model=…` configuration override.
  modelArgument: (args) =>
    optionIn(args, ['-m', '--model']) ??
    args.find((arg, i) => /^(-c|--config=?)?model\s*=/.test(arg) && (/^-/.test(arg) || ['-c', '--config'].includes(args[i - 1] ?? ''))),
  // From its catalog, read once per executable (and kept), so that an unreadable one refuses the launch before any run exists.
  toldModel: codexModelEntry,
  invocation: ({ endpoint, prompt, model, homeDir, extraArgs, mcpStartTimeoutMs, told }): AgentInvocation => {
    if (!told) throw new Error('A Codex invocation takes the model its launch resolved (LaunchContext.told, from codex.toldModel).');
    const catalog = join(homeDir, '.codex', 'a2rl-model-catalog.json');
    const timeouts = { startup_timeout_sec: Math.ceil(mcpStartTimeoutMs / 1000), tool_timeout_sec: 120 };
    // required: Codex waits for the server and fails without it; approve: write tools are not refused under approval "never".
    const server = {
      ...(endpoint.kind === 'stdio'
        ? { command: endpoint.command, args: endpoint.args }
        : { url: endpoint.url, bearer_token_env_var: runTokenVariable }),
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
      // Code mode off where a model does not force it (its catalog entry, below, does that part), and no plugin sync at
      // start: features.plugins is what runs a `git ls-remote` to GitHub, in a jail without network.
      'features.code_mode': false,
      'features.code_mode_only': false,
      'features.plugins': false,
      'features.remote_plugin': false,
      web_search: 'disabled',
      approval_policy: 'never',
      ...(told.catalogEntry ? { model_catalog_json: catalog } : {}),
      ...(model ? {} : { model: told.model }),
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
      env: { CODEX_HOME: join(homeDir, '.codex'), ...(endpoint.kind === 'http' ? { [runTokenVariable]: endpoint.token } : {}) },
      files: [
        { path: join(homeDir, '.codex', 'config.toml'), content: '# a2rl run: the configuration is on the command line.\n' },
        ...(told.catalogEntry ? [{ path: catalog, content: `${JSON.stringify({ models: [told.catalogEntry] })}\n` }] : []),
      ],
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

/** An MCP server as Gemini CLI and its fork Qwen Code configure it. */
function geminiStyleServer(endpoint: McpEndpoint): Record<string, unknown> {
  return endpoint.kind === 'stdio'
    ? { command: endpoint.command, args: endpoint.args }
    : { httpUrl: endpoint.url, headers: { Authorization: `Bearer ${endpoint.token}` } };
}

const geminiCli: AgentKind = {
  name: 'gemini-cli',
  executable: 'gemini',
  npmPackage: '@google/gemini-cli',
  transcript: 'stream-json (one JSON event per line)',
  versionArgs: ['--version'],
  environment: ['GEMINI_*', 'GOOGLE_*'],
  apiHosts: ['generativelanguage.googleapis.com'],
  modelActivity: geminiCliTranscript.modelActivity,
  modelArgument: (args) => optionIn(args, ['-m', '--model']),
  invocation: ({ endpoint, prompt, model, homeDir, extraArgs, mcpStartTimeoutMs }) => {
    // User settings in the private HOME: read whoever owns them (a system settings file is skipped unless root owns it and every folder above it).
    const settings = join(homeDir, '.gemini', 'settings.json');
    const server = { ...geminiStyleServer(endpoint), trust: true, timeout: Math.max(120_000, mcpStartTimeoutMs) };
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

/** OpenCode's version `scripts/setup.sh` installs: its plugin package is pinned to it in the pre-seeded config folder. */
const openCodeVersion = '1.18.33';

/**
 * The OpenAI-compatible provider OpenCode gets for a `--model` without a provider (`NAME`, not `PROVIDER/NAME`):
 * Chat Completions at $OPENAI_BASE_URL with $OPENAI_API_KEY, read by OpenCode from its environment, not written down.
 */
const openCodeProvider = 'openai-compatible';

/**
 * The files OpenCode's user configuration folder needs so that it starts as configured, offline: its configuration,
 * and a `package.json` whose one dependency a lock file and a `node_modules/` already hold. OpenCode otherwise runs
 * `npm install @opencode-ai/plugin` there on every start (a network call, with no switch to turn it off).
 */
function openCodeConfigFolder(folder: string, config: unknown): AgentFile[] {
  const dependencies = { '@opencode-ai/plugin': openCodeVersion };
  const lock = {
    name: 'opencode',
    lockfileVersion: 3,
    requires: true,
    packages: { '': { dependencies }, 'node_modules/@opencode-ai/plugin': { version: openCodeVersion } },
  };
  const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;
  return [
    { path: join(folder, 'opencode.json'), content: json(config) },
    { path: join(folder, 'package.json'), content: json({ dependencies }) },
    { path: join(folder, 'package-lock.json'), content: json(lock) },
    { path: join(folder, 'node_modules', '.a2rl'), content: 'Made by a2rl so that OpenCode finds its dependencies installed.\n' },
  ];
}

const openCode: AgentKind = {
  name: 'opencode',
  executable: 'opencode',
  npmPackage: 'opencode-ai',
  transcript: 'run --format json (one JSON event per line)',
  versionArgs: ['--version'],
  environment: ['OPENAI_*', 'ANTHROPIC_*'],
  apiHosts: ['api.openai.com', 'api.anthropic.com'],
  modelActivity: openCodeTranscript.modelActivity,
  modelArgument: (args) => optionIn(args, ['-m', '--model']),
  invocation: ({ endpoint, prompt, model, homeDir, extraArgs, mcpStartTimeoutMs }) => {
    // Its tools are named <server>_<tool>; a slow server start leaves it with no tools (and exit 0) unless it waits.
    const server =
      endpoint.kind === 'stdio'
        ? { type: 'local', command: [endpoint.command, ...endpoint.args] }
        : { type: 'remote', url: endpoint.url, headers: { Authorization: `Bearer {env:${runTokenVariable}}` }, oauth: false };
    const ownProvider = model !== undefined && !model.includes('/');
    const config = {
      $schema: 'https://opencode.ai/config.json',
      ...(ownProvider
        ? {
            provider: {
              [openCodeProvider]: {
                npm: '@ai-sdk/openai-compatible',
                name: 'OpenAI-compatible API at $OPENAI_BASE_URL',
                options: { baseURL: '{env:OPENAI_BASE_URL}', apiKey: '{env:OPENAI_API_KEY}' },
                models: { [model]: {} },
              },
            },
          }
        : {}),
      mcp: { [serverName]: { ...server, enabled: true, timeout: mcpStartTimeoutMs } },
      // Only this server's tools, offered and allowed; every other tool and permission denied.
      tools: { '*': false, [`${serverName}_*`]: true },
      permission: { '*': 'deny', [`${serverName}_*`]: 'allow' },
      autoupdate: false,
      share: 'disabled',
    };
    return {
      command: 'opencode',
      args: [
        'run',
        '--format',
        'json',
        // Its errors on stderr: a model call it retries (a 503) is reported nowhere else.
        '--print-logs',
        '--log-level',
        'ERROR',
        ...(model ? ['--model', ownProvider ? `${openCodeProvider}/${model}` : model] : []),
        ...extraArgs,
        prompt,
      ],
      env: {
        // No AGENTS.md or CLAUDE.md from the working folder's parents, HOME or ~/.claude; no project configuration,
        // plugins, skills, model list download, update or sharing.
        OPENCODE_DISABLE_PROJECT_CONFIG: '1',
        OPENCODE_DISABLE_CLAUDE_CODE: '1',
        OPENCODE_DISABLE_CLAUDE_CODE_PROMPT: '1',
        OPENCODE_DISABLE_CLAUDE_CODE_SKILLS: '1',
        OPENCODE_DISABLE_EXTERNAL_SKILLS: '1',
        OPENCODE_DISABLE_DEFAULT_PLUGINS: '1',
        OPENCODE_DISABLE_MODELS_FETCH: '1',
        OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
        OPENCODE_DISABLE_AUTOUPDATE: '1',
        OPENCODE_DISABLE_SHARE: '1',
        ...(endpoint.kind === 'http' ? { [runTokenVariable]: endpoint.token } : {}),
      },
      files: openCodeConfigFolder(join(homeDir, '.config', 'opencode'), config),
    };
  },
};

/**
 * Qwen Code's built-in tools (version 0.24.4: those of `--bare` and of a full start), excluded by name: its MCP tools
 * are named `mcp__<server>__<tool>`, so excluding its read_file leaves this server's.
 */
const qwenBuiltinTools = [
  'run_shell_command',
  'read_file',
  'write_file',
  'edit',
  'notebook_edit',
  'glob',
  'grep_search',
  'list_directory',
  'read_many_files',
  'web_fetch',
  'web_search',
  'save_memory',
  'todo_write',
  'task',
  'agent',
  'skill',
  'exit_plan_mode',
  'ask_user_question',
  'get_goal',
  'update_goal',
  'lsp',
];

const qwenCode: AgentKind = {
  name: 'qwen-code',
  executable: 'qwen',
  npmPackage: '@qwen-code/qwen-code',
  transcript: 'stream-json (one JSON event per line)',
  versionArgs: ['--version'],
  environment: ['OPENAI_*'],
  apiHosts: ['api.openai.com'],
  modelActivity: qwenCodeTranscript.modelActivity,
  modelArgument: (args) => optionIn(args, ['-m', '--model']),
  invocation: ({ endpoint, prompt, model, agentDir, extraArgs, mcpStartTimeoutMs }) => {
    const config = join(agentDir, 'mcp.json');
    const server = { ...geminiStyleServer(endpoint), trust: true, timeout: Math.max(120_000, mcpStartTimeoutMs) };
    return {
      command: 'qwen',
      args: [
        // The prompt first: its list options (--exclude-tools) would take a prompt after them as one more item.
        prompt,
        // Nothing found on its own: no settings, QWEN.md, AGENTS.md, extensions, hooks or skills; only what is given here.
        '--bare',
        '--output-format',
        'stream-json',
        '--approval-mode',
        'yolo',
        '--auth-type',
        'openai',
        '--mcp-config',
        config,
        '--allowed-mcp-server-names',
        serverName,
        `--exclude-tools=${qwenBuiltinTools.join(',')}`,
        ...(model ? ['--model', model] : []),
        ...extraArgs,
      ],
      env: { QWEN_CODE_SUPPRESS_YOLO_WARNING: '1' },
      files: [{ path: config, content: `${JSON.stringify({ mcpServers: { [serverName]: server } }, null, 2)}\n` }],
    };
  },
};

/**
 * OpenHands (its V1 CLI, a Python package: `uv tool install openhands`), from its documented headless mode and MCP
 * configuration: `openhands --headless --json -t PROMPT`, its LLM from `LLM_MODEL`, `LLM_API_KEY` and `LLM_BASE_URL`
 * (read only with `--override-with-envs`), its MCP servers from `~/.openhands/mcp.json` (`mcpServers`, as FastMCP
 * reads it). Not yet run against the real CLI: tested with a stand-in that reads what it was given as OpenHands would.
 * No documented setting turns its own terminal and file tools off: they work only inside the jail.
 */
const openHands: AgentKind = {
  name: 'openhands',
  executable: 'openhands',
  install: 'uv tool install openhands --python 3.12',
  untested: 'not yet run against the real CLI',
  transcript: '--headless --json (its SDK events as JSON), then its saved conversation stats',
  versionArgs: ['--version'],
  environment: ['LLM_*'],
  modelActivity: openHandsTranscript.modelActivity,
  transcriptTrailer: openHandsStatsLines,
  invocation: ({ endpoint, prompt, model, homeDir, extraArgs }): AgentInvocation => {
    const server =
      endpoint.kind === 'stdio'
        ? { command: endpoint.command, args: endpoint.args }
        : { url: endpoint.url, transport: 'http', headers: { Authorization: `Bearer ${endpoint.token}` } };
    return {
      command: 'openhands',
      args: ['--headless', '--json', '--override-with-envs', ...extraArgs, '-t', prompt],
      env: model ? { LLM_MODEL: model } : {},
      files: [
        {
          path: join(homeDir, '.openhands', 'mcp.json'),
          content: `${JSON.stringify({ mcpServers: { [serverName]: server } }, null, 2)}\n`,
        },
      ],
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

/**
 * A `command:` agent's command line with its leading ./ or ../ path made absolute against `folder` (and quoted): the
 * jail starts the command in the run's own folder. From where a2rl runs, or a suite file's folder in a suite.
 */
export function commandFrom(folder: string, command: string): string {
  return command.replace(/^\.\.?\/[^\s'"\\$`;&|<>()]*/, (path) => `'${resolve(folder, path).replaceAll("'", `'\\''`)}'`);
}

function commandAgent(spec: string): AgentKind {
  const command = commandFrom(process.cwd(), spec);
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

const builtinAgents = [claudeCode, codex, geminiCli, openCode, qwenCode, openHands];

/** The agent CLI of that name, if a2rl launches one. */
export function builtinAgent(name: string): AgentKind | undefined {
  return builtinAgents.find((candidate) => candidate.name === name);
}

/** The agent `--agent` names: claude-code, codex, gemini-cli, opencode, qwen-code, replay:FILE or command:'…'. */
export function agentKind(spec: string): AgentKind {
  if (spec.startsWith('replay:') && spec.length > 'replay:'.length) return replayAgent(spec.slice('replay:'.length));
  if (spec.startsWith('command:') && spec.trim().length > 'command:'.length) return commandAgent(spec.slice('command:'.length));
  const agent = builtinAgent(spec);
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
    `${agent.name} is not installed: no "${agent.executable}" on PATH. Install it with ${agent.install ?? `npm install -g ${agent.npmPackage} (or run scripts/setup.sh)`}, then run this again.`,
  );
}

/** Whether a Node version meets an `engines.node` range of the forms the agent CLIs use (`>=22`, `>=22.0.0`); undefined for another form. */
function meetsRange(version: string, range: string): boolean | undefined {
  const match = /^>=\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(range.trim());
  if (!match) return undefined;
  const have = version.split('.').map(Number);
  const want = match.slice(1).map((part) => Number(part ?? 0));
  for (let i = 0; i < 3; i++) if (have[i] !== want[i]) return (have[i] ?? 0) > (want[i] ?? 0);
  return true;
}

/**
 * The Node each installed agent CLI asks for in its package's `engines.node`, and whether this Node meets it: `a2rl
 * doctor`'s agents lines. CLIs that are not installed, or whose package says nothing, are left out.
 */
export function agentNodeRequirements(node = process.versions.node): Array<{ agent: string; range: string; met: boolean | undefined }> {
  const found: Array<{ agent: string; range: string; met: boolean | undefined }> = [];
  for (const agent of builtinAgents) {
    if (!agent.npmPackage) continue;
    let executable: string | undefined;
    try {
      executable = findExecutable(agent);
    } catch {
      continue;
    }
    const manifest = join(agentInstallRoot(executable!), agent.npmPackage, 'package.json');
    if (!existsSync(manifest)) continue;
    const range = (JSON.parse(readFileSync(manifest, 'utf8')) as { engines?: { node?: string } }).engines?.node;
    if (range) found.push({ agent: agent.name, range, met: meetsRange(node, range) });
  }
  return found;
}
