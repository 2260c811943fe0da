import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tools } from '../tools/index.js';
import { agentKind, findExecutable, type LaunchContext, mcpStartTimeout } from '../src/launch/agents.js';
import { type LaunchedRun, startHttpServer, versionOf } from '../src/launch/launcher.js';
import { relayEntry } from '../src/launch/bridge.js';
import { Store } from '../src/store/store.js';
import { runUsage } from '../src/transcripts/run-usage.js';
import { readTranscript } from '../src/transcripts/transcript.js';
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

/** Codex's invocation as a launch makes it: the model it is told resolved once from the installed Codex's catalog first. */
const codexInvocation = (launch: LaunchContext) => {
  const codex = agentKind('codex');
  return codex.invocation({ ...launch, told: codex.toldModel!(findExecutable(codex)!, launch.model) });
};

describe("each CLI's wait for its MCP server", () => {
  it('is three times the measured start plus a minute, never under two minutes', () => {
    expect(mcpStartTimeout(1_000)).toBe(120_000);
    expect(mcpStartTimeout(100_000)).toBe(360_000);
  });

  it('reaches every CLI in its own setting: Claude Code MCP_TIMEOUT, Codex startup_timeout_sec, the others their config timeout', () => {
    const wait = mcpStartTimeout(100_000);
    const claude = agentKind('claude-code').invocation(context(wait));
    expect(claude.env).toMatchObject({ MCP_TIMEOUT: '360000', MCP_CONNECT_TIMEOUT_MS: '360000' });
    const codex = codexInvocation(context(wait));
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

  it("Codex: with no --model, its catalog's default named and given its entry with the MCP tools first-class; a model the catalog does not know, as it is", () => {
    const codex = agentKind('codex');
    const defaulted = codex.toldModel!(findExecutable(codex)!, undefined);
    const told = codexInvocation({ ...context(120_000), model: undefined });
    // The default the installed Codex's catalog names, which that catalog puts in code mode (test/agents.test.ts runs it).
    expect(defaulted.model).toMatch(/^gpt-/);
    expect(told.args).toContain(`model=${JSON.stringify(defaulted.model)}`);
    expect(told.args).toContain('model_catalog_json="/runs/r/agent/home/.codex/a2rl-model-catalog.json"');
    const catalog = JSON.parse(told.files.find((f) => f.path.endsWith('a2rl-model-catalog.json'))!.content);
    expect(catalog.models).toHaveLength(1);
    expect(catalog.models[0]).toMatchObject({
      slug: defaulted.model,
      tool_mode: null,
      use_responses_lite: false,
      apply_patch_tool_type: null,
      supports_search_tool: false,
    });
    // Its identity kept: the instructions its model was trained with.
    expect(JSON.stringify(catalog.models[0])).toContain('You are Codex');
    expect(codex.toldModel!(findExecutable(codex)!, 'scripted-model')).toEqual({ model: 'scripted-model' });
    const scripted = codexInvocation(context(120_000));
    expect(scripted.args.filter((arg) => arg.startsWith('model'))).toEqual([]);
    expect(scripted.args.slice(scripted.args.indexOf('--model'), scripted.args.indexOf('--model') + 2)).toEqual([
      '--model',
      'scripted-model',
    ]);
    expect(scripted.files.map((f) => f.path)).toEqual(['/runs/r/agent/home/.codex/config.toml']);
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

describe('what a launch refuses before any run exists, saying what to do', () => {
  it('a Codex whose model catalog cannot be read, and an --agent-arg naming the model, which the run would not record', () => {
    const bin = tempDir('agent-launch-catalog-bin');
    writeFileSync(join(bin, 'codex'), '#!/bin/sh\n[ "$1" = --version ] && { echo "codex-cli 0.171.0"; exit 0; }\nexit 1\n');
    chmodSync(join(bin, 'codex'), 0o755);
    const home = join(tempDir('agent-launch-catalog'), 'home');
    const run = (...args: string[]) => {
      const result = spawnSync(process.execPath, [cliEntry, '--home', home, '--init', 'run', '--task', 'micro-gsm8k', ...args], {
        env: { ...process.env, PATH: `${bin}${delimiter}${process.env.PATH}` },
        encoding: 'utf8',
      });
      return { status: result.status, stderr: result.stderr.trim() };
    };
    expect(run('--agent', 'codex')).toEqual({
      status: 3,
      stderr: expect.stringMatching(/^a2rl: Cannot read the model catalog of .*codex \(debug models --bundled: .*\): reinstall Codex/),
    });
    expect(run('--agent', 'codex', '--agent-arg=-c', '--agent-arg=model="gpt-x"').stderr).toBe(
      'a2rl: --agent-arg model="gpt-x" names codex\'s model, which the run would not record: give the model with --model.',
    );
    const store = new Store(join(home, 'store.sqlite'));
    try {
      expect(store.listRuns()).toEqual([]);
    } finally {
      store.close();
    }
    // Each CLI's own model options, alone or with their value; a Codex setting that only starts with "model" is no model.
    const named = (agent: string, ...args: string[]) => agentKind(agent).modelArgument?.(args);
    expect(named('codex', '-m', 'x')).toBe('-m');
    expect(named('codex', '--config=model=x')).toBe('--config=model=x');
    expect(named('codex', '--config', 'model = "x"')).toBe('model = "x"');
    expect(named('codex', '-c', 'model_provider="p"', '-c', 'model_reasoning_effort="high"')).toBeUndefined();
    expect(named('claude-code', '--model=opus')).toBe('--model=opus');
    expect(named('gemini-cli', '-m', 'x')).toBe('-m');
    expect(named('opencode', '--model', 'x')).toBe('--model');
    expect(named('qwen-code', '-m', 'x')).toBe('-m');
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
      // It had exactly the a2rl tools (the stand-in's own first line), and each call it made reached the run's server and
      // succeeded, as its transcript, read as OpenHands writes it, says.
      const saved = readFileSync(join(agentDir, 'transcript.jsonl'), 'utf8');
      expect([...JSON.parse(saved.slice(0, saved.indexOf('\n'))).tools].sort()).toEqual(tools.map((tool) => tool.name).sort());
      const transcript = readTranscript('openhands', saved);
      const calls = ['read_instructions', 'list_files', 'write_file', 'read_file', 'budget_status'];
      expect(transcript.steps.filter((step) => step.kind === 'tool_call').map((step) => step.tool)).toEqual(calls);
      expect(transcript.steps.filter((step) => step.kind === 'tool_result').map((step) => [step.tool, step.isError ?? false])).toEqual(
        calls.map((call) => [call, false]),
      );
      const store = new Store(join(home, 'store.sqlite'));
      try {
        // Its tokens and dollars: the conversation stats it saved in its HOME, appended to its transcript when it exited
        // (the stand-in counts six model responses, each 1000 prompt tokens, 400 of them cached, 50 completion tokens, $0.001).
        expect(runUsage(store, run!.run_id)).toMatchObject({
          model: 'openai/scripted-model',
          turns: 6,
          tool_calls: 5,
          input_tokens: 6000,
          cached_input_tokens: 2400,
          output_tokens: 300,
          cost_source: 'agent',
        });
        expect(runUsage(store, run!.run_id).cost_usd).toBeCloseTo(0.006, 9);
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
