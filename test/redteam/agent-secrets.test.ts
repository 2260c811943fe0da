import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { LaunchedRun } from '../../src/launch/launcher.js';
import { cliEntry, packageRoot } from '../../src/util/paths.js';
import { codexProvider, modelApiEnv, startModelApi } from '../helpers/model-apis.js';
import { tempDir } from '../helpers/sandbox.js';
import { withStore } from './harness.js';

/**
 * The agent's jail holds no secret of the operator's (invariant 7): its environment is an
 * allow-list of the launcher's, and of the host's loopback servers it reaches only its own run's,
 * which gives it nothing beyond its own run.
 */

const home = tempDir('redteam-secrets');
const files = tempDir('redteam-secrets-files');
// What --agent-bind shows a root launcher's agent, which runs as a uid of its own, must be readable by others.
chmodSync(files, 0o755);
/** The operator's HOME: its path is no secret, but nothing in a jail has any business naming it. */
const operatorHome = tempDir('redteam-secrets-operator');
const canary = `canary${randomBytes(8).toString('hex')}`;

/** Secrets an operator's shell may hold beside whatever the test runner's environment has. */
const plantedSecrets = [
  'A2RL_ADMIN_TOKEN',
  'A2RL_JUDGE_API_KEY',
  'A2RL_LLM_API_KEY',
  'A2RL_RUN_TOKEN',
  'A2RL_MCP_CONFIG',
  'A2RL_HOME',
  'AWS_SECRET_ACCESS_KEY',
  'GITHUB_TOKEN',
  'HF_TOKEN',
  'SSH_AUTH_SOCK',
  'XDG_CONFIG_HOME',
];
/** What every agent gets of the launcher's environment, by design (docs/operating.md, The jail). */
const passedToEveryAgent = /^(PATH|LANG|LANGUAGE|LC_\w+|TERM|COLORTERM|NO_COLOR|TZ)$/;
/** What the launcher itself runs by, left out rather than planted (a canary there would stop it). */
const launcherRunsBy = /^(NODE_OPTIONS|TMPDIR|A2RL_SANDBOX)$/;

interface Kind {
  agent: string;
  /** Its provider's variables, which it gets by design: real values, never canaries. */
  own: RegExp;
  /** The a2rl variables the launcher gives this kind, and no other. */
  a2rlVariables: string[];
  args: (apiUrl: string) => string[];
}

const replay = join(files, 'instructions.jsonl');
writeFileSync(replay, JSON.stringify({ tool: 'read_instructions' }));
/** A command agent that keeps its view of its environment, then plays the replay through a real MCP client. */
const commandAgent = `env > env.txt; exec ${process.execPath} ${cliEntry} replay ${replay} --mcp-config "$A2RL_MCP_CONFIG"`;
const a2rlCodeBinds = ['dist', 'node_modules', 'package.json'].map((path) => `--agent-bind=${join(packageRoot, path)}`);

const kinds: Kind[] = [
  { agent: 'claude-code', own: /^(ANTHROPIC|CLAUDE_CODE)_/, a2rlVariables: ['A2RL_RUN_ID'], args: () => [] },
  {
    agent: 'codex',
    own: /^(OPENAI|CODEX)_/,
    a2rlVariables: ['A2RL_RUN_ID'],
    args: (url) => codexProvider(url).map((arg) => `--agent-arg=${arg}`),
  },
  { agent: 'gemini-cli', own: /^(GEMINI|GOOGLE)_/, a2rlVariables: ['A2RL_RUN_ID'], args: () => [] },
  {
    agent: `replay:${replay}`,
    own: /^$/,
    a2rlVariables: ['A2RL_MCP_CONFIG', 'A2RL_MODEL', 'A2RL_PROMPT', 'A2RL_RUN_ID'],
    args: () => [],
  },
  {
    agent: `command:${commandAgent}`,
    own: /^$/,
    a2rlVariables: ['A2RL_MCP_CONFIG', 'A2RL_MODEL', 'A2RL_PROMPT', 'A2RL_RUN_ID'],
    args: () => [`--agent-bind=${files}`, ...a2rlCodeBinds],
  },
];

/**
 * The launcher's environment for one kind: every variable of this test's own environment, the
 * planted secrets and the other providers' keys hold a canary; only what every agent gets, the
 * kind's own provider variables and PATH keep real values.
 */
function plantedEnvironment(kind: Kind, apiUrl: string): Record<string, string> {
  const apis = modelApiEnv(apiUrl);
  const env: Record<string, string> = {};
  for (const name of new Set([...Object.keys(process.env), ...plantedSecrets, ...Object.keys(apis)])) {
    if (passedToEveryAgent.test(name) || launcherRunsBy.test(name) || kind.own.test(name)) continue;
    env[name] = `${canary}-${name}`;
  }
  const own = Object.fromEntries(Object.entries(apis).filter(([name]) => kind.own.test(name)));
  return { ...env, ...own, PATH: process.env.PATH!, HOME: operatorHome };
}

/** Environments of the processes in agents' jails (they carry A2RL_RUN_ID), by run, read from /proc while they run. */
function watchJails(): () => Map<string, string[]> {
  const seen = new Map<string, Set<string>>();
  const timer = setInterval(() => {
    for (const pid of readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue;
      let environ: string;
      try {
        environ = readFileSync(`/proc/${pid}/environ`, 'latin1');
      } catch {
        continue;
      }
      const runId = /(?:^|\0)A2RL_RUN_ID=([^\0]+)/.exec(environ)?.[1];
      if (runId) (seen.get(runId) ?? seen.set(runId, new Set()).get(runId)!).add(environ);
    }
  }, 100);
  return () => {
    clearInterval(timer);
    return new Map([...seen].map(([runId, environs]) => [runId, [...environs]]));
  };
}

/** Every file under a folder, as text. */
function filesUnder(dir: string): Array<[string, string]> {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((name) => join(dir, name))
    .filter((path) => statSync(path).isFile())
    .map((path) => [path, readFileSync(path, 'latin1')]);
}

function a2rl(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stderr: string; runs: LaunchedRun[] }> {
  const child = spawn(process.execPath, [cliEntry, '--home', home, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stderr, runs: stdout ? JSON.parse(stdout) : [] })));
}

describe('red team: the jail holds no secret of the launcher (invariant 7)', { timeout: 300_000 }, () => {
  describe.concurrent('a canary in every variable of the launcher environment reaches no jail', () => {
    for (const kind of kinds) {
      const name = kind.agent.split(':')[0]!;
      it(`${name}: not in its environment, its files, its transcript or its model's requests; no a2rl variable but its own`, async ({
        expect,
      }) => {
        const api = await startModelApi([{ call: [{ tool: 'read_instructions' }] }, { text: 'Done.' }]);
        const stopWatching = watchJails();
        const launched = await a2rl(
          [
            'run',
            '--agent',
            kind.agent,
            '--task',
            'micro-gsm8k',
            '--json',
            '--budget',
            'wall=2m',
            '--model',
            'scripted-model',
            ...kind.args(api.url),
          ],
          plantedEnvironment(kind, api.url),
        );
        const environs = stopWatching();
        await api.close();
        expect(launched.code, launched.stderr).toBe(0);
        const [run] = launched.runs as [LaunchedRun];
        expect(run.infrastructure_failure).toBeNull();

        const jailed = environs.get(run.run_id) ?? [];
        expect(jailed.length, 'no process of the jail was seen').toBeGreaterThan(0);
        for (const environ of jailed) {
          expect(environ).not.toContain(canary);
          expect(environ).not.toContain(operatorHome);
          const a2rlNames = environ
            .split('\0')
            .map((entry) => entry.split('=')[0]!)
            .filter((variable) => variable.startsWith('A2RL_'));
          expect(new Set(a2rlNames)).toEqual(new Set(kind.a2rlVariables));
        }
        // Its folder: configuration, prompt, working folder, private HOME, transcript and stderr; not the log of the
        // server behind the bridge, which runs outside the jail in the launcher's environment.
        const agentFiles = filesUnder(join(home, 'runs', run.run_id, 'agent')).filter(([path]) => !path.endsWith('server-stderr.log'));
        expect(agentFiles.map(([path]) => path)).toContain(join(home, 'runs', run.run_id, 'agent', 'transcript.jsonl'));
        for (const [path, text] of agentFiles) expect(text, path).not.toContain(canary);
        if (name === 'command') {
          const seen = readFileSync(join(home, 'runs', run.run_id, 'agent', 'work', 'env.txt'), 'utf8');
          expect(seen).toContain(`A2RL_RUN_ID=${run.run_id}`);
        }
        for (const request of api.requests) expect(request.text).not.toContain(canary);
        // A CLI's model was asked, and saw none of it either.
        if (!kind.agent.includes(':')) expect(api.scripted().length).toBeGreaterThan(0);
      });
    }
  });

  let operatorServer: ChildProcess | undefined;
  afterAll(() => void operatorServer?.kill('SIGTERM'));

  it("a jailed agent probing every loopback server it can find with every token it can find gets nothing beyond its own run, the launcher's full environment notwithstanding", async () => {
    // The operator's own serve --http on the same home, with an admin token, and a run of another agent on it.
    const adminToken = `admin-${randomBytes(16).toString('hex')}`;
    operatorServer = spawn(process.execPath, [cliEntry, '--home', home, 'serve', '--http', '--port', '0'], {
      env: { ...process.env, A2RL_ADMIN_TOKEN: adminToken },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const operatorUrl = await new Promise<string>((resolve) => {
      let stderr = '';
      operatorServer!.stderr!.on('data', (chunk: Buffer) => {
        stderr += chunk;
        const match = /listening on (http:\/\/\S+)/.exec(stderr);
        if (match) resolve(match[1]!);
      });
    });
    const created = await fetch(`${operatorUrl}/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ task: 'micro-gsm8k', label: 'other-agent' }),
    });
    // The admin token works: had it reached the jail, the agent could have made runs.
    expect(created.status).toBe(201);
    const other = (await created.json()) as { run_id: string; token: string };
    const runsBefore = withStore(home, (store) => store.listRuns().length);

    const probe = join(files, 'probe.mjs');
    writeFileSync(probe, probeScript);
    const operatorPort = Number(new URL(operatorUrl).port);
    const launched = await a2rl(
      [
        ...['run', '--agent', `command:${process.execPath} ${probe}`, '--task', 'micro-gsm8k', '--json', '--transport', 'http'],
        `--agent-bind=${files}`,
        `--agent-bind=${join(packageRoot, 'node_modules')}`,
        '--agent-env=PROBE_PORTS',
      ],
      {
        ...process.env,
        A2RL_ADMIN_TOKEN: adminToken,
        A2RL_RUN_TOKEN: other.token,
        A2RL_JUDGE_API_KEY: `judge-${canary}`,
        // The operator's server, which the agent also tries, though its jail lists no such port.
        PROBE_PORTS: String(operatorPort),
      },
    );
    expect(launched.code, launched.stderr).toBe(0);
    const [run] = launched.runs as [LaunchedRun];
    const report = JSON.parse(readFileSync(join(home, 'runs', run.run_id, 'agent', 'work', 'probe.json'), 'utf8')) as ProbeReport;

    const ownPort = Number(new URL(report.own.url).port);
    // Its jail has a network of its own: the one HTTP server it reaches is its own run's, forwarded into it; the
    // operator's, and any other on the host's loopback, are out of reach.
    expect(report.ports).toContain(operatorPort);
    expect(report.httpPorts).toEqual([ownPort]);
    const a2rlResults = report.results;
    // None of the operator's secrets was to be found.
    expect(report.candidates).not.toContain(adminToken);
    expect(report.candidates).not.toContain(other.token);
    expect(report.candidates.join(' ')).not.toContain(canary);
    expect(report.candidates).toContain(report.own.token);
    // No run made: the launcher's server has no admin token at all.
    const creations = a2rlResults.filter((result) => result.method === 'POST' && result.path === '/runs');
    expect(creations).toHaveLength(report.candidates.length + 1);
    for (const result of creations) expect(result.status, JSON.stringify(result)).toBe(403);
    // A session only with its own token; every other token refused.
    for (const result of a2rlResults.filter((r) => r.path === '/mcp' || r.path === '/sse')) {
      expect(result.status, JSON.stringify(result)).toBe(result.token === report.own.token ? 200 : 401);
    }
    // What answers without a token names no run.
    for (const result of a2rlResults.filter((r) => r.path === '/metrics' || r.path === '/healthz')) {
      expect(result.text).not.toContain(other.run_id);
      expect(result.text).not.toContain(run.run_id);
    }
    withStore(home, (store) => {
      expect(store.listRuns()).toHaveLength(runsBefore + 1);
      expect(store.listEvents(other.run_id, 'session')).toEqual([]);
      expect(store.listEvents(other.run_id, 'tool')).toEqual([]);
      expect(store.listEvents(run.run_id, 'tool').map((event) => event.name)).toEqual(['budget_status']);
    });
  });
});

interface ProbeReport {
  ports: number[];
  httpPorts: number[];
  candidates: string[];
  own: { url: string; token: string };
  results: Array<{ port: number; method: string; path: string; token: string | null; status: number | null; text: string }>;
}

/**
 * The attacker: collects every string of its environment and configuration that could be a
 * token, finds every listening TCP port its jail shows (and tries $PROBE_PORTS), calls every
 * endpoint of every HTTP server among them with each token, writes what it got to probe.json,
 * then works in its own run (so the run is a real one).
 */
const probeScript = `
import { readFileSync, writeFileSync } from 'node:fs';
const sdk = ${JSON.stringify(join(packageRoot, 'node_modules', '@modelcontextprotocol', 'sdk', 'dist', 'esm'))};
const { Client } = await import(sdk + '/client/index.js');
const { StreamableHTTPClientTransport } = await import(sdk + '/client/streamableHttp.js');
const env = process.env;
const candidates = new Set(Object.values(env).filter((value) => /^[\\w.-]{16,}$/.test(value)));
for (const match of readFileSync(env.A2RL_MCP_CONFIG, 'utf8').matchAll(/Bearer ([\\w.-]+)/g)) candidates.add(match[1]);
candidates.add('forged-token-000000000000000000000');
const ports = new Set();
for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
  let text = '';
  try { text = readFileSync(file, 'utf8'); } catch { continue; }
  for (const line of text.split('\\n').slice(1)) {
    const fields = line.trim().split(/\\s+/);
    if (fields[3] === '0A') ports.add(parseInt(fields[1].split(':').pop(), 16));
  }
}
for (const port of (env.PROBE_PORTS ?? '').split(',').filter(Boolean)) ports.add(Number(port));
async function call(port, method, path, token, body, timeoutMs = 3000) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  try {
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    if (token) headers.authorization = 'Bearer ' + token;
    const res = await fetch('http://127.0.0.1:' + port + path, { method, headers, body, signal: controller.signal });
    const text = path === '/sse' ? '' : (await res.text()).slice(0, 4000);
    return { port, method, path, token: token ?? null, status: res.status, text };
  } catch (error) {
    return { port, method, path, token: token ?? null, status: null, text: String(error) };
  } finally {
    clearTimeout(timer);
    controller.abort();
  }
}
const httpPorts = [];
for (const port of ports) if ((await call(port, 'GET', '/healthz', undefined, undefined, 1000)).status !== null) httpPorts.push(port);
const initialize = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'probe', version: '1' } } });
const results = [];
await Promise.all(httpPorts.map(async (port) => {
  results.push(await call(port, 'GET', '/healthz'), await call(port, 'GET', '/metrics'), await call(port, 'GET', '/runs'));
  results.push(await call(port, 'POST', '/runs', undefined, JSON.stringify({ task: 'micro-gsm8k' })));
  for (const token of candidates) {
    results.push(await call(port, 'POST', '/runs', token, JSON.stringify({ task: 'micro-gsm8k' })));
    results.push(await call(port, 'POST', '/mcp', token, initialize));
    results.push(await call(port, 'GET', '/sse', token));
  }
}));
writeFileSync('probe.json', JSON.stringify({ ports: [...ports], httpPorts, candidates: [...candidates], own: { url: env.A2RL_MCP_URL, token: env.A2RL_RUN_TOKEN }, results }, null, 2));
const client = new Client({ name: 'probe', version: '1' });
await client.connect(new StreamableHTTPClientTransport(new URL(env.A2RL_MCP_URL), { requestInit: { headers: { Authorization: 'Bearer ' + env.A2RL_RUN_TOKEN } } }));
await client.listTools();
await client.callTool({ name: 'budget_status', arguments: {} });
await client.close();
`;
