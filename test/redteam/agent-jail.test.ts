import { spawn } from 'node:child_process';
import { chmodSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { connect, createServer, type Server } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { jobIdentity, jobIdentityRange } from '../../sandbox/job-identity.js';
import { hasWorkspaceImage, mountWorkspace, unmountWorkspace } from '../../sandbox/run-storage.js';
import { agentIdentity } from '../../src/launch/jail.js';
import { jailNetworkPlan, startJailNetwork } from '../../src/launch/jail-network.js';
import type { LaunchedRun } from '../../src/launch/launcher.js';
import { cliEntry, packageRoot, tasksRoot } from '../../src/util/paths.js';
import { tempDir } from '../helpers/sandbox.js';
import { openForWriting, withStore } from './harness.js';

/** `a2rl run` on a home; resolves with the exit code and the launched runs. */
function a2rlRun(
  home: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stderr: string; runs: LaunchedRun[] }> {
  const child = spawn(process.execPath, [cliEntry, '--home', home, 'run', '--task', 'micro-gsm8k', '--json', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stderr, runs: stdout ? JSON.parse(stdout) : [] })));
}

describe('red team: the agent process is jailed (invariant 7)', { timeout: 300_000 }, () => {
  it('a command agent with a shell reads no evaluation data, no store, no other run and no operator home; it writes only its own folders', async () => {
    const home = tempDir('redteam-jail');
    // Another run, with a file in its workspace and its agent folder.
    const replay = join(tempDir('redteam-jail-replay'), 'other.jsonl');
    writeFileSync(replay, JSON.stringify({ tool: 'write_file', arguments: { path: 'code/secret.txt', content: 'OTHER-RUN-SECRET' } }));
    const other = await a2rlRun(home, ['--agent', `replay:${replay}`]);
    expect(other.code, other.stderr).toBe(0);
    const otherRun = join(home, 'runs', other.runs[0]!.run_id);
    // An ended run's workspace filesystem is unmounted with its server (invariant 14): mounted here for the attack to meet.
    if (hasWorkspaceImage(otherRun) && (await mountWorkspace(otherRun, true))) onTestFinished(() => unmountWorkspace(otherRun));
    expect(readFileSync(join(otherRun, 'workspace', 'code', 'secret.txt'), 'utf8')).toBe('OTHER-RUN-SECRET');

    const evalFile = join(tasksRoot, 'micro-gsm8k', 'eval', 'private.jsonl');
    const probes: Array<[string, string]> = [
      ['eval', `cat ${evalFile}`],
      ['tasks', `ls ${tasksRoot}`],
      ['store', `cat ${join(home, 'store.sqlite')}`],
      ['home', `ls ${home}`],
      ['other-workspace', `cat ${join(otherRun, 'workspace', 'code', 'secret.txt')}`],
      ['other-agent', `ls ${join(otherRun, 'agent')}`],
      ['operator-home', `ls -a ${homedir()}`],
      ['runs', `ls ${join(home, 'runs')}`],
      ['a2rl-home-env', 'test -n "$A2RL_HOME" && echo "$A2RL_HOME"'],
      ['write-usr', 'touch /usr/pwned && echo wrote'],
      ['write-own', 'echo mine > own.txt && cat own.txt'],
    ];
    // Each probe's output and status go to a report in the agent's own working folder.
    const command = probes.map(([name, probe]) => `echo "== ${name}"; (${probe}) 2>&1; echo "rc=$?"`).join('; ');
    const attack = await a2rlRun(home, ['--agent', `command:{ ${command}; } > report.txt`]);
    // It never connected: no tools, an infrastructure failure (retried once), and a2rl run says so.
    expect(attack.code).toBe(1);
    expect(attack.runs).toHaveLength(2);
    const own = join(home, 'runs', attack.runs[0]!.run_id);
    const report = readFileSync(join(own, 'agent', 'work', 'report.txt'), 'utf8');
    const section = (name: string) => report.split(`== ${name}\n`)[1]!.split('\n== ')[0]!;
    const evalLine = readFileSync(evalFile, 'utf8').split('\n')[0]!;
    expect(report).not.toContain(evalLine.slice(0, 40));
    expect(report).not.toContain('OTHER-RUN-SECRET');
    expect(report).not.toContain('SQLite format');
    for (const name of ['eval', 'tasks', 'store', 'other-workspace', 'operator-home']) expect(section(name), name).toMatch(/rc=[12]/);
    // Where the run's own folder lies, the home shows only the path to it: no store, no other run.
    expect(section('home').trim().split('\n').slice(0, -1)).toEqual(['runs']);
    expect(section('runs').trim().split('\n').slice(0, -1)).toEqual([attack.runs[0]!.run_id]);
    expect(section('other-agent')).toMatch(/rc=[12]/);
    expect(section('a2rl-home-env')).toMatch(/^rc=1/);
    expect(section('write-usr')).toMatch(/rc=1/);
    expect(section('write-own')).toBe('mine\nrc=0\n');
    // The host is untouched, and the other run's files are as they were.
    expect(readdirSync('/usr')).not.toContain('pwned');
    expect(readFileSync(join(otherRun, 'workspace', 'code', 'secret.txt'), 'utf8')).toBe('OTHER-RUN-SECRET');
  });

  it('cannot change host kernel settings, and writes as an unprivileged uid of its own where the launcher is root (issue 45)', async () => {
    const home = tempDir('redteam-jail-uid');
    const probes = tempDir('redteam-jail-uid-probes');
    writeFileSync(join(probes, 'open.py'), openForWriting);
    // What --agent-bind shows a dropped agent must be readable by others.
    chmodSync(probes, 0o755);
    const attack = await a2rlRun(home, [
      ...['--agent', `command:python3 ${join(probes, 'open.py')} > opened.json; echo x > owned; id -u > uid; echo y > "$HOME/home-owned"`],
      ...['--agent-bind', probes],
    ]);
    expect(attack.runs.length, attack.stderr).toBeGreaterThan(0);
    const runId = attack.runs[0]!.run_id;
    const agentDir = join(home, 'runs', runId, 'agent');
    const opened = JSON.parse(readFileSync(join(agentDir, 'work', 'opened.json'), 'utf8')) as { tried: number; opened: string[] };
    expect(opened.tried).toBeGreaterThan(100);
    expect(opened.opened).toEqual([]);
    const owner = statSync(join(agentDir, 'work', 'owned')).uid;
    expect(readFileSync(join(agentDir, 'work', 'uid'), 'utf8').trim()).toBe(String(owner));
    expect(statSync(join(agentDir, 'home', 'home-owned')).uid).toBe(owner);
    if (process.getuid?.() === 0) {
      expect(owner).not.toBe(0);
      expect(owner).toBe(agentIdentity(runId)!.uid);
      // Neither the run's jobs' uid: the agent and its jobs cannot touch each other's files.
      expect(owner).not.toBe(jobIdentity(runId)!.uid);
      expect(owner).toBeGreaterThanOrEqual(jobIdentityRange.first);
    } else expect(owner).toBe(process.getuid?.());
  });

  it("has a network of its own: a host loopback service is unreachable, directly or through the proxy, while the model API and the run's MCP endpoint answer over stdio and HTTP", async () => {
    const home = tempDir('redteam-jail-net');
    const listen = async (server: Server) => {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return (server.address() as { port: number }).port;
    };
    // A service of the operator's on the host's loopback (a database, a notebook): no agent may reach it.
    let serviceReached = 0;
    const service = createServer((socket) => {
      serviceReached++;
      socket.end('HOST-SECRET\n');
    });
    const servicePort = await listen(service);
    // The agent's model API, on the host's loopback too.
    let modelRequests = 0;
    const modelApi = createHttpServer((_request, response) => {
      modelRequests++;
      response.end('MODEL-OK');
    });
    const modelUrl = `http://127.0.0.1:${await listen(modelApi)}/v1`;

    const probes = tempDir('redteam-jail-net-probes');
    // What --agent-bind shows a dropped agent must be readable by others.
    chmodSync(probes, 0o755);
    // Tries the host's service directly and through the proxy (an absolute URL and a CONNECT), and the model API both ways.
    writeFileSync(
      join(probes, 'probe.mjs'),
      `import { connect } from 'node:net';
import { writeFileSync } from 'node:fs';
const proxy = new URL(process.env.HTTPS_PROXY);
const exchange = (port, request) => new Promise((resolve) => {
  const socket = connect(port, '127.0.0.1');
  let answer = '';
  socket.on('connect', () => request && socket.write(request));
  socket.on('data', (chunk) => (answer += chunk));
  socket.on('end', () => resolve(answer));
  socket.on('error', (error) => resolve(error.code));
});
const service = '127.0.0.1:${servicePort}';
const report = {
  direct: await exchange(${servicePort}),
  proxiedGet: await exchange(Number(proxy.port), 'GET http://' + service + '/ HTTP/1.1\\r\\nHost: ' + service + '\\r\\nConnection: close\\r\\n\\r\\n'),
  proxiedConnect: await exchange(Number(proxy.port), 'CONNECT ' + service + ' HTTP/1.1\\r\\nHost: ' + service + '\\r\\n\\r\\n'),
  model: await fetch(process.env.OPENAI_BASE_URL).then((response) => response.text(), (error) => String(error.cause?.code ?? error)),
  proxiedModel: await exchange(Number(proxy.port), 'GET ' + process.env.OPENAI_BASE_URL + ' HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n'),
};
writeFileSync('network.json', JSON.stringify(report));
`,
    );
    writeFileSync(join(probes, 'replay.jsonl'), JSON.stringify({ tool: 'budget_status' }));
    const command = `node ${join(probes, 'probe.mjs')} && node ${cliEntry} replay ${join(probes, 'replay.jsonl')} --mcp-config "$A2RL_MCP_CONFIG"`;
    const binds = [probes, join(packageRoot, 'dist'), join(packageRoot, 'node_modules'), join(packageRoot, 'package.json')];
    try {
      for (const transport of ['stdio', 'http']) {
        const launched = await a2rlRun(
          home,
          [
            ...['--agent', `command:${command}`, '--transport', transport],
            ...binds.flatMap((path) => ['--agent-bind', path]),
            // A remote API among the agent's URLs: its jail gets the proxy, which lets through only the agent's endpoints.
            ...['--agent-env', 'OPENAI_BASE_URL', '--agent-env', 'REMOTE_API_URL'],
          ],
          { OPENAI_BASE_URL: modelUrl, REMOTE_API_URL: 'https://api.example.invalid/v1' },
        );
        expect(launched.code, launched.stderr).toBe(0);
        expect(launched.runs.map((run) => run.infrastructure_failure)).toEqual([null]);
        const runId = launched.runs[0]!.run_id;
        const report = JSON.parse(readFileSync(join(home, 'runs', runId, 'agent', 'work', 'network.json'), 'utf8'));
        expect(report.direct, transport).toBe('ECONNREFUSED');
        expect(report.proxiedGet, transport).toMatch(/^HTTP\/1\.1 403 [\s\S]*\[FORBIDDEN\]/);
        expect(report.proxiedConnect, transport).toMatch(/^HTTP\/1\.1 403 [\s\S]*\[FORBIDDEN\]/);
        expect(report.model, transport).toBe('MODEL-OK');
        expect(report.proxiedModel, transport).toMatch(/^HTTP\/1\.1 200 [\s\S]*MODEL-OK$/);
        // The run's own MCP endpoint answered: the replay's call is in the run's record.
        const calls = withStore(home, (store) => store.listEvents(runId, 'tool').map((event) => event.name));
        expect(calls, transport).toEqual(['budget_status']);
      }
      expect(serviceReached).toBe(0);
      expect(modelRequests).toBe(4);
    } finally {
      service.close();
      modelApi.close();
    }
  });

  it('survives an agent that resets its proxy connections: CONNECTs to a forbidden host dropped at once leave the proxy answering', async () => {
    const network = await startJailNetwork(jailNetworkPlan(['https://api.example.invalid/v1'], []), {});
    const proxySocket = join(network.dir, 'proxy.sock');
    const exchange = (request: string, dropAtOnce: boolean) =>
      new Promise<string>((resolve) => {
        const socket = connect(proxySocket, () => {
          socket.write(request);
          if (dropAtOnce) socket.destroy();
        });
        let answer = '';
        socket.on('data', (chunk) => (answer += chunk));
        socket.on('close', () => resolve(answer));
        socket.on('error', () => undefined);
      });
    try {
      const forbidden = 'CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n';
      // Each refusal is written to a socket the agent already closed: without an error handler on it, this process would die here.
      await Promise.all(Array.from({ length: 20 }, () => exchange(forbidden, true)));
      expect(await exchange(forbidden, false)).toMatch(/^HTTP\/1\.1 403 [\s\S]*\[FORBIDDEN\]/);
    } finally {
      await network.close();
    }
  });

  it('lets into the jail only the endpoints of the URLs the agent is given and its provider API: loopback ones forwarded, others through the proxy', () => {
    const plan = jailNetworkPlan(
      [
        'http://127.0.0.1:8000/v1',
        'sk-not-a-url',
        'model_providers.p={name="p",base_url="http://localhost:8000/v1",wire_api="responses"}',
        'https://vllm.lan/v1',
        'http://[::1]:9000/mcp',
      ],
      ['api.anthropic.com'],
    );
    expect(plan.loopback).toEqual([
      { host: '127.0.0.1', port: 8000 },
      { host: 'localhost', port: 8000 },
      { host: '::1', port: 9000 },
    ]);
    expect(plan.allowed).toEqual([
      { host: '127.0.0.1', port: 8000 },
      { host: 'localhost', port: 8000 },
      { host: 'vllm.lan', port: 443 },
      { host: '::1', port: 9000 },
      { host: 'api.anthropic.com', port: 443 },
    ]);
    expect(plan.proxy).toBe(true);
    // An agent given only loopback URLs (a command agent, a scripted API) gets no proxy.
    expect(jailNetworkPlan(['http://127.0.0.1:8000/v1'], []).proxy).toBe(false);
  });
});
