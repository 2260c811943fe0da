import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tools } from '../tools/index.js';
import { agentKind, type LaunchContext, mcpStartTimeout } from '../src/launch/agents.js';
import { type LaunchedRun, startHttpServer, versionOf } from '../src/launch/launcher.js';
import { relayEntry } from '../src/launch/bridge.js';
import { Store } from '../src/store/store.js';
import { cliEntry, packageRoot } from '../src/util/paths.js';
import { tempDir } from './helpers/sandbox.js';

/**
 * What the launcher gives each agent CLI beside the real runs of test/agents.test.ts: the wait for its MCP server, an
 * HTTP server that never starts, a version that cannot be read.
 */

const context = (mcpStartTimeoutMs: number): LaunchContext => ({
  endpoint: { kind: 'stdio', command: '/usr/bin/node', args: ['relay.js'] },
  prompt: 'Work on the task.',
  model: 'scripted-model',
  agentDir: '/runs/r/agent',
  homeDir: '/runs/r/agent/home',
  extraArgs: [],
  mcpStartTimeoutMs,
});

describe("each CLI's wait for its MCP server", () => {
  it('is three times the measured start plus a minute, never under two minutes', () => {
    expect(mcpStartTimeout(1_000)).toBe(120_000);
    expect(mcpStartTimeout(100_000)).toBe(360_000);
  });

  it('reaches every CLI in its own setting: Claude Code MCP_TIMEOUT, Codex startup_timeout_sec, the others their config timeout', () => {
    const wait = mcpStartTimeout(100_000);
    const claude = agentKind('claude-code').invocation(context(wait));
    expect(claude.env).toMatchObject({ MCP_TIMEOUT: '360000', MCP_CONNECT_TIMEOUT_MS: '360000' });
    const codex = agentKind('codex').invocation(context(wait));
    expect(codex.args.find((arg) => arg.startsWith('mcp_servers.a2rl='))).toContain('startup_timeout_sec=360');
    const configOf = (agent: string, file: string) =>
      JSON.parse(
        agentKind(agent)
          .invocation(context(wait))
          .files.find((f) => f.path.endsWith(file))!.content,
      );
    expect(configOf('gemini-cli', 'settings.json').mcpServers.a2rl.timeout).toBe(360_000);
    expect(configOf('qwen-code', 'mcp.json').mcpServers.a2rl.timeout).toBe(360_000);
    expect(configOf('opencode', 'opencode.json').mcp.a2rl).toMatchObject({ type: 'local', timeout: 360_000 });
  });

  it('OpenCode: only the a2rl tools allowed, its plugin install pre-seeded, a bare model served at $OPENAI_BASE_URL', () => {
    const invocation = agentKind('opencode').invocation(context(120_000));
    const file = (name: string) =>
      JSON.parse(invocation.files.find((f) => f.path === join('/runs/r/agent/home/.config/opencode', name))!.content);
    expect(file('opencode.json')).toMatchObject({
      tools: { '*': false, 'a2rl_*': true },
      permission: { '*': 'deny', 'a2rl_*': 'allow' },
      provider: { 'openai-compatible': { options: { baseURL: '{env:OPENAI_BASE_URL}' }, models: { 'scripted-model': {} } } },
    });
    // Every dependency of its package.json is in the lock file, and node_modules/ exists: OpenCode runs no npm install.
    const dependencies = Object.keys(file('package.json').dependencies);
    expect(Object.keys(file('package-lock.json').packages)).toEqual(['', ...dependencies.map((name) => `node_modules/${name}`)]);
    expect(invocation.files.some((f) => f.path.includes('/node_modules/'))).toBe(true);
    expect(invocation.args).toEqual([
      ...['run', '--format', 'json', '--print-logs', '--log-level', 'ERROR'],
      ...['--model', 'openai-compatible/scripted-model', 'Work on the task.'],
    ]);
    expect(invocation.env).toMatchObject({ OPENCODE_DISABLE_PROJECT_CONFIG: '1', OPENCODE_DISABLE_CLAUDE_CODE: '1' });
  });
});

describe("a2rl run's serve --http", () => {
  it('that never prints its address: an error naming what it waited for, and the server ended', async () => {
    const home = tempDir('agent-launch-http');
    const slow = join(home, 'slow-server.cjs');
    writeFileSync(slow, "if (process.argv.includes('serve')) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 600000);\n");
    const saved = process.env.NODE_OPTIONS;
    process.env.NODE_OPTIONS = `--require ${slow}`;
    try {
      await expect(startHttpServer(home, [], 1)).rejects.toThrow(/did not print "listening on http:\/\/…" within 1 s.*it was stopped/);
    } finally {
      if (saved === undefined) delete process.env.NODE_OPTIONS;
      else process.env.NODE_OPTIONS = saved;
    }
    // No process is left serving that home.
    const left = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })
      .split('\n')
      .filter((line) => line.includes(home) && line.includes('serve'));
    expect(left).toEqual([]);
  });
});

describe("an agent CLI's version", () => {
  it('that cannot be read is refused before any run, saying what to do', () => {
    const dir = tempDir('agent-launch-version');
    const broken = join(dir, 'claude');
    writeFileSync(broken, '#!/bin/sh\necho "Error: cannot find module" >&2\nexit 3\n');
    chmodSync(broken, 0o755);
    expect(() => versionOf(broken, agentKind('claude-code'))).toThrow(
      /Cannot read claude-code's version \(.*claude --version: Error: cannot find module\).*reinstall the CLI/,
    );
    const silent = join(dir, 'codex');
    writeFileSync(silent, '#!/bin/sh\nexit 0\n');
    chmodSync(silent, 0o755);
    expect(() => versionOf(silent, agentKind('codex'))).toThrow(/printed nothing/);
  });
});

/**
 * OpenHands is not installable here (a Python package): its launcher is tested against the stand-in agent installed as
 * `openhands`, which reads `~/.openhands/mcp.json` as OpenHands does and calls every a2rl tool over MCP. When the real
 * CLI is installable, test/agents.test.ts runs it as it runs the others.
 */
describe('openhands (not yet run against the real CLI): what the launcher starts and writes', { timeout: 300_000 }, () => {
  const bin = tempDir('agent-launch-bin');
  symlinkSync(join(packageRoot, 'test', 'fixtures', 'stand-in-agent.mjs'), join(bin, 'openhands'));
  const home = tempDir('agent-launch-openhands');
  const work = tempDir('agent-launch-openhands-files');
  // What --agent-bind shows a root launcher's agent, which runs as a uid of its own, must be readable by others.
  chmodSync(work, 0o755);
  const replay = join(work, 'every-tool.jsonl');
  writeFileSync(
    replay,
    [
      { tool: 'read_instructions' },
      { tool: 'list_files', arguments: { path: '.' } },
      { tool: 'write_file', arguments: { path: 'code/hello.py', content: "print('hello')" } },
      { tool: 'read_file', arguments: { path: 'code/hello.py' } },
      { tool: 'budget_status' },
    ]
      .map((step) => JSON.stringify(step))
      .join('\n'),
  );

  for (const transport of ['stdio', 'http'] as const) {
    it(`over ${transport}: its documented headless command line, ~/.openhands/mcp.json naming only this server, LLM_* passed`, async () => {
      const child = spawn(
        process.execPath,
        [
          ...[cliEntry, '--home', home, 'run', '--agent', 'openhands', '--task', 'micro-gsm8k', '--transport', transport, '--json'],
          ...['--model', 'openai/scripted-model', '--budget', 'wall=3m'],
          ...[join(packageRoot, 'dist'), join(packageRoot, 'node_modules'), work].map((path) => `--agent-bind=${path}`),
          '--agent-env=STAND_IN_*',
        ],
        {
          env: {
            ...process.env,
            PATH: `${bin}${delimiter}${process.env.PATH}`,
            STAND_IN_REPLAY: replay,
            LLM_API_KEY: 'sk-llm',
            OTHER_KEY: 'x',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk));
      const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
      expect(code, stderr).toBe(0);
      const [run] = JSON.parse(stdout) as LaunchedRun[];
      expect(run).toMatchObject({
        agent: 'openhands',
        agent_version: 'openhands stand-in 9.9.9',
        exit_code: 0,
        infrastructure_failure: null,
      });
      const agentDir = join(home, 'runs', run!.run_id, 'agent');
      const seen = JSON.parse(readFileSync(join(agentDir, 'work', 'stand-in.json'), 'utf8'));
      const prompt = readFileSync(join(agentDir, 'prompt.md'), 'utf8');
      expect(seen.argv).toEqual(['--headless', '--json', '--override-with-envs', '-t', prompt]);
      // Its LLM from the variables it reads with --override-with-envs; nothing else of the launcher's environment.
      expect(seen.env).toMatchObject({ HOME: join(agentDir, 'home'), LLM_MODEL: 'openai/scripted-model', LLM_API_KEY: 'sk-llm' });
      const config = JSON.parse(readFileSync(join(agentDir, 'home', '.openhands', 'mcp.json'), 'utf8'));
      expect(Object.keys(config.mcpServers)).toEqual(['a2rl']);
      if (transport === 'stdio')
        expect(config.mcpServers.a2rl).toEqual({ command: process.execPath, args: [relayEntry, '/run/a2rl/mcp.sock'] });
      else
        expect(config.mcpServers.a2rl).toMatchObject({
          transport: 'http',
          headers: { Authorization: expect.stringMatching(/^Bearer [\w-]{43}$/) },
        });
      // It had exactly the a2rl tools, and each call it made reached the run's server and succeeded.
      const transcript = readFileSync(join(agentDir, 'transcript.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line));
      expect([...transcript[0].tools].sort()).toEqual(tools.map((tool) => tool.name).sort());
      expect(transcript.filter((event) => event.type === 'tool_result').every((event) => !event.is_error)).toBe(true);
      const store = new Store(join(home, 'store.sqlite'));
      try {
        expect(store.listEvents(run!.run_id, 'tool').map((event) => event.name)).toEqual([
          'read_instructions',
          'list_files',
          'write_file',
          'read_file',
          'budget_status',
        ]);
      } finally {
        store.close();
      }
    });
  }
});
