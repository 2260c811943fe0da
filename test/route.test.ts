import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BubblewrapBackend } from '../sandbox/bwrap.js';
import type { SandboxInstance } from '../sandbox/contract.js';
import { fullTierRuntimeTarget } from '../src/tasks/full-task.js';
import { type JobTrace, jobTraceSandbox, keepJobTrace, readJobTrace, traceJobVariable } from '../src/jobs/job-trace.js';
import { analyzeRun, type JobFact, loadRunFacts } from '../src/reports/analysis.js';
import { readRoute, routeFromTrace, trainerRoutes } from '../src/reports/route.js';
import { packageRoot } from '../src/util/paths.js';
import { fullTierPython } from './helpers/fixture-hub.js';
import { type InProcessRun, startInProcess } from './helpers/in-process.js';
import { call } from './helpers/mcp.js';
import { liveOwner, tempDir } from './helpers/sandbox.js';

/**
 * The training route is what ran: each job's Python writes a trace (src/jobs/job-trace.ts) and the report reads the
 * route from it. Small real scripts, run as real training jobs of one micro-gsm8k run (Debian's python3 and torch),
 * one per route, and the three mislabels the keyword reading made; trl's trainers in the full tier's environment.
 */

/** A tiny model over the task's characters: enough for a real gradient step, nothing to wait for. */
const tinyModel = `import json, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Embedding(128, 8), torch.nn.Flatten(), torch.nn.Linear(8 * 16, 128))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def encode(text):
    codes = [min(ord(c), 127) for c in text[:16]]
    return torch.tensor(codes + [0] * (16 - len(codes)))
def log_probs(prompts, targets):
    logits = model(torch.stack([encode(p) for p in prompts]))
    return torch.log_softmax(logits, -1).gather(1, torch.tensor([[min(ord(t[0]), 127)] for t in targets])).squeeze(1)
def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
`;

const scripts: Record<string, string> = {
  // Supervised fine-tuning on the task's training answers.
  'sft.py': `${tinyModel}
items = read_jsonl("data/train.jsonl")[:64]
for step in range(3):
    loss = torch.nn.functional.cross_entropy(model(torch.stack([encode(it["question"]) for it in items])), torch.tensor([ord(it["answer"][0]) for it in items]))
    opt.zero_grad(); loss.backward(); opt.step()
print("sft done", float(loss))
`,
  // Rejection sampling: the policy's own launch_rollouts samples, the rewarded ones kept.
  'rft.py': `${tinyModel}
import glob
kept = [e for path in sorted(glob.glob("rollouts/*.jsonl")) for e in read_jsonl(path) if e["reward"] == 1.0]
for step in range(3):
    loss = -log_probs([e["prompt"] for e in kept], [e["completion"] or " " for e in kept]).mean()
    opt.zero_grad(); loss.backward(); opt.step()
print("rft done", len(kept))
`,
  // GRPO by hand: group-relative advantages of launch_rollouts' rewards weight the log-likelihood.
  'grpo.py': `${tinyModel}
import glob
episodes = [e for path in sorted(glob.glob("rollouts/*.jsonl")) for e in read_jsonl(path)]
rewards = torch.tensor([float(e["reward"]) for e in episodes]).view(-1, 8)
advantages = ((rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + 1e-6)).flatten()  # group relative
loss = -(advantages * log_probs([e["prompt"] for e in episodes], [e["completion"] or " " for e in episodes])).mean()
opt.zero_grad(); loss.backward(); opt.step()
print("grpo done")
`,
  // DPO by hand on preference pairs built from the training data: no reward, no samples of the policy's.
  'dpo.py': `${tinyModel}
items = read_jsonl("data/train.jsonl")[:32]
chosen = log_probs([it["question"] for it in items], [it["answer"] for it in items])
rejected = log_probs([it["question"] for it in items], ["x" for it in items])
loss = -torch.nn.functional.logsigmoid(0.1 * (chosen - rejected)).mean()  # direct preference optimisation
opt.zero_grad(); loss.backward(); opt.step()
print("dpo done")
`,
  // Mislabel 3: behaviour cloning on the training items a reward accepts, once read as plain SFT.
  'clone.py': `${tinyModel}
def reward(item):
    return 1.0 if "#### " in item["answer"] else 0.0
demonstrations = read_jsonl("data/train.jsonl")[:64]
kept = [it for it in demonstrations if reward(it) == 1.0]
for step in range(3):
    loss = torch.nn.functional.cross_entropy(model(torch.stack([encode(it["question"]) for it in kept])), torch.tensor([ord(it["answer"][0]) for it in kept]))
    opt.zero_grad(); loss.backward(); opt.step()
print("cloned", len(kept))
`,
  // Mislabel 2: one script, GRPO or SFT by an environment variable that a bash -c line sets.
  'modes.py': `${tinyModel}
import glob, os
MODE = os.environ.get("MODE", "grpo")
if MODE == "grpo":
    episodes = [e for path in sorted(glob.glob("rollouts/*.jsonl")) for e in read_jsonl(path)]
    rewards = torch.tensor([float(e["reward"]) for e in episodes]).view(-1, 8)
    advantages = ((rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + 1e-6)).flatten()  # GRPO
    loss = -(advantages * log_probs([e["prompt"] for e in episodes], [e["completion"] for e in episodes])).mean()
else:
    items = read_jsonl("data/train.jsonl")[:64]
    loss = torch.nn.functional.cross_entropy(model(torch.stack([encode(it["question"]) for it in items])), torch.tensor([ord(it["answer"][0]) for it in items]))
opt.zero_grad(); loss.backward(); opt.step()
print("mode", MODE)
`,
  // REINFORCE on samples it draws itself between gradient steps (no launch_rollouts), with the task's own decoder.
  'online.py': `${tinyModel}
from microlm import checkpoint, generate
policy = checkpoint.load("models/base")
prompts = [it["question"] for it in read_jsonl("data/train.jsonl")[:4]]
for step in range(2):
    completions = generate(policy, prompts, 4, temperature=1.0, seed=step)
    rewards = torch.tensor([float(len(c) > 2) for c in completions])
    log_prob = log_probs(prompts, [c or " " for c in completions])
    loss = -(log_prob * rewards).mean()  # REINFORCE
    opt.zero_grad(); loss.backward(); opt.step()
print("online done")
`,
  // SFT that prints a sampled generation every step: it samples between gradient steps, but trains on given data.
  'sampled_eval.py': `${tinyModel}
from microlm import checkpoint, generate
policy = checkpoint.load("models/base")
items = read_jsonl("data/train.jsonl")[:64]
for step in range(3):
    loss = torch.nn.functional.cross_entropy(model(torch.stack([encode(it["question"]) for it in items])), torch.tensor([ord(it["answer"][0]) for it in items]))
    opt.zero_grad(); loss.backward(); opt.step()
    print("sample:", generate(policy, [items[0]["question"]], 4, temperature=0.8, seed=step))
print("sft done", float(loss))
`,
  // Imports torch and reads the rollouts, but trains nothing.
  'look.py': `${tinyModel}
import glob
print(len([e for path in sorted(glob.glob("rollouts/*.jsonl")) for e in read_jsonl(path)]), "episodes; nothing trained")
`,
};

/** Commands run as training jobs, and the route each must be given. */
const jobs: Array<[string, string]> = [
  ['python3 code/sft.py', 'sft'],
  ['python3 code/rft.py', 'expert_iteration'],
  ['python3 code/grpo.py', 'grpo'],
  ['python3 code/dpo.py', 'dpo'],
  ['python3 code/clone.py', 'reward_filtered_sft'],
  [`bash -c 'MODE=sft python3 code/modes.py'`, 'sft'],
  ['python3 code/online.py', 'reinforce'],
  ['python3 code/sampled_eval.py', 'sft'],
  ['python3 code/look.py', 'unknown'],
  // The oracles' own scripts, cut short: the SFT route and the reward-only route (fine-tuning on rewarded rollouts).
  ['python3 code/train.py --steps 2 --holdout 8 --out output/sft', 'sft'],
  ['python3 code/rl_train.py --epochs 0.01 --batch-size 4 --out output/rl', 'expert_iteration'],
];

describe('the route is what ran, from each job trace', () => {
  let served: InProcessRun;
  let trained: JobFact[];

  beforeAll(async () => {
    served = await startInProcess({ home: tempDir('route-home') });
    const { client } = served;
    for (const [name, content] of Object.entries(scripts)) await call(client, 'write_file', { path: `code/${name}`, content });
    for (const name of ['train.py', 'rl_train.py']) {
      const content = readFileSync(join(packageRoot, 'tasks', 'micro-gsm8k', 'oracle', name), 'utf8');
      await call(client, 'write_file', { path: `code/${name}`, content });
    }
    const rollouts = await call(client, 'launch_rollouts', { checkpoint: 'models/base', episodes: 64, group_size: 8, temperature: 1 });
    await finished(served, rollouts.structured.job_id as number);
    // Up to three at a time, the run's limit on long jobs.
    for (let i = 0; i < jobs.length; i += 3) {
      const started = await Promise.all(jobs.slice(i, i + 3).map(([command]) => call(client, 'run_training', { command })));
      await Promise.all(started.map((job) => finished(served, job.structured.job_id as number)));
    }
    trained = analyzeRun(loadRunFacts(served.engine.store, served.run.id)).jobs.filter((j) => j.kind === 'training');
  }, 600_000);
  afterAll(async () => {
    await served?.close();
  });

  it.each(jobs)('%s → %s', (command, route) => {
    const job = trained.find((j) => j.command === command)!;
    expect(job.state, `${command}: ${job.route_basis}`).toBe('succeeded');
    expect(job.route, job.route_basis!).toBe(route);
    expect(job.route_basis).toContain('job trace');
  });

  it('says what decided each: the rollout batches a job read, the data it was given, no gradient at all', () => {
    const basis = (command: string) => trained.find((j) => j.command === command)!.route_basis;
    expect(basis('python3 code/rft.py')).toContain("on launch_rollouts' batches (rollouts/batch-001.jsonl)");
    expect(basis('python3 code/sft.py')).toContain("on given data, not the policy's samples");
    expect(basis('python3 code/look.py')).toBe('its Python ran no gradient step (job trace)');
    expect(basis('python3 code/online.py')).toContain('on samples it drew between gradient steps');
    // Sampled between gradient steps, but no reward in its code: what it shows, not what it trains on.
    const sampledEval = trained.find((j) => j.command === 'python3 code/sampled_eval.py')!;
    expect(readJobTrace(served.run.dir, sampledEval.job_id)!.online).toBe(true);
    expect(sampledEval.route_basis).toContain("on given data, not the policy's samples");
  });

  it('the keyword reading made the bash -c mislabel: the script with a GRPO mode read as GRPO', () => {
    expect(readRoute(`bash -c 'MODE=sft python3 code/modes.py'`, { 'modes.py': scripts['modes.py']! }).route).toBe('grpo');
  });

  it('a trace is evidence read defensively: malformed facts are skipped, a link is not followed, no trace is no reading', () => {
    const trace = readJobTrace(served.run.dir, trained[0]!.job_id)!;
    expect(trace).toMatchObject({ python: true, online: false, programs: [['python3', 'code/sft.py']] });
    expect(trace.gradients).toBeGreaterThan(0);
    expect(trace.reads).toContain('data/train.jsonl');

    const forged = tempDir('route-forged');
    mkdirSync(join(forged, 'traces'));
    const lines = [
      'not json',
      'null',
      '[1]',
      '{"fact": "trainer", "name": "GRPOTrainer; rm -rf /", "phase": "train"}',
      '{"fact": "trainer", "name": "PPOTrainer", "phase": "sideways"}',
      '{"fact": "exit", "gradients": 1e400}',
      '{"fact": "read", "path": 7}',
      '{"fact": "python", "argv": "python3 x.py"}',
      '{"fact": "gradient"}',
    ];
    writeFileSync(join(forged, 'traces', 'job-1.jsonl'), lines.join('\n'));
    expect(readJobTrace(forged, 1)).toEqual({
      python: true,
      programs: [],
      trainers: { built: [], trained: [] },
      gradients: 1,
      online: false,
      reads: [],
    });
    symlinkSync(join(served.run.dir, 'traces', `job-${trained[0]!.job_id}.jsonl`), join(forged, 'traces', 'job-2.jsonl'));
    expect(readJobTrace(forged, 2)).toBeUndefined();
    expect(readJobTrace(forged, 3)).toBeUndefined();

    // The jobs write their traces in the workspace (its quota); the job manager keeps them in the run's folder, never through a link.
    const workspaceTrace = join(served.run.dir, 'workspace', '.a2rl', 'traces', `job-${trained[0]!.job_id}.jsonl`);
    expect(readFileSync(join(served.run.dir, 'traces', `job-${trained[0]!.job_id}.jsonl`))).toEqual(readFileSync(workspaceTrace));
    const planted = tempDir('route-planted');
    mkdirSync(join(planted, '.a2rl', 'traces'), { recursive: true });
    symlinkSync(workspaceTrace, join(planted, '.a2rl', 'traces', 'job-4.jsonl'));
    expect(keepJobTrace(forged, planted, 4)).toBe(false);
    writeFileSync(join(planted, '.a2rl', 'traces', 'job-5.jsonl'), '{"fact": "gradient"}\n');
    symlinkSync(workspaceTrace, join(forged, 'traces', 'job-5.jsonl'));
    const before = readFileSync(workspaceTrace);
    expect(() => keepJobTrace(forged, planted, 5)).toThrow();
    expect(readFileSync(workspaceTrace)).toEqual(before);
    expect(routeFromTrace(undefined, new Set(), 'python3 code/sft.py', undefined)).toBeUndefined();
  });
});

describe('the route from a trace alone', () => {
  const trace = (reads: string[]): JobTrace => ({
    python: true,
    programs: [['python3', 'train.py']],
    trainers: { built: [], trained: [] },
    gradients: 3,
    online: false,
    reads,
  });

  it('a hand-written GRPO loop sampling through vLLM, which the hook may not see, is GRPO, not SFT', () => {
    const files = {
      'train.py': `from vllm import LLM, SamplingParams
llm = LLM("models/base")
for prompts in batches:
    outputs = llm.generate(prompts, SamplingParams(temperature=1.0, n=8))
    rewards = score(outputs)
    advantages = (rewards - rewards.mean(1, keepdim=True)) / rewards.std(1, keepdim=True)  # group relative
    loss.backward()
`,
    };
    const reading = routeFromTrace(trace(['data/train.jsonl']), new Set(), 'python3 train.py', files)!;
    expect(reading).toMatchObject({ route: 'grpo', undecided: false });
    expect(reading.basis).toContain('no sampling or rollout batch read was traced');
  });

  it("a trace past its read bound keeps its last facts: a data loader's reads do not hide the gradient step", () => {
    const runDir = tempDir('route-long-trace');
    mkdirSync(join(runDir, 'traces'));
    const reads = Array.from({ length: 6000 }, (_, i) => JSON.stringify({ fact: 'read', path: `data/shard-${i}.jsonl`, pid: 2 }));
    const lines = [JSON.stringify({ argv: ['python3', 'train.py'], fact: 'python', pid: 1 }), ...reads, '{"fact": "gradient", "pid": 1}'];
    writeFileSync(
      join(runDir, 'traces', 'job-1.jsonl'),
      `${lines.join('\n')}\n${JSON.stringify({ fact: 'exit', gradients: 7, pid: 1 })}\n`,
    );
    expect(lines.join('\n').length).toBeGreaterThan(256 * 1024);
    expect(readJobTrace(runDir, 1)).toMatchObject({ python: true, gradients: 7, programs: [['python3', 'train.py']] });
  });
});

describe("trl's trainers in the full tier's environment", () => {
  let sandbox: SandboxInstance;
  let runDir: string;
  let workspace: string;

  beforeAll(async () => {
    expect(existsSync(fullTierPython), `${fullTierPython} is missing: run \`npm run setup\` (it builds .venv-full)`).toBe(true);
    runDir = tempDir('route-full');
    workspace = tempDir('route-full-ws');
    const trace = jobTraceSandbox('/workspace');
    sandbox = await new BubblewrapBackend(liveOwner).create({
      name: 'route-full',
      mounts: [
        { source: workspace, target: '/workspace', readOnly: false },
        { source: join(packageRoot, '.venv-full'), target: fullTierRuntimeTarget, readOnly: true },
        ...trace.mounts,
      ],
      hidden: [packageRoot],
      env: { PYTHONPATH: `/workspace/lib:${trace.pythonPath}`, ...trace.env, PATH: `${fullTierRuntimeTarget}/bin:/usr/bin:/bin` },
      workdir: '/workspace',
    });
  });
  afterAll(async () => {
    await sandbox?.destroy();
  });

  it('mislabel 1: a module-level GRPOTrainer import beside an SFTTrainer that trains is SFT; an import alone is nothing', async () => {
    const script = `from trl import GRPOTrainer, SFTConfig, SFTTrainer  # GRPOTrainer imported, never used
import torch
from datasets import Dataset
from tokenizers import Tokenizer, models
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
model = GPT2LMHeadModel(GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=1))
tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({str(i): i for i in range(32)}, unk_token="0")), pad_token="0", eos_token="1")
def collate(rows):
    ids = torch.tensor([r["input_ids"] for r in rows])
    return {"input_ids": ids, "labels": ids, "attention_mask": torch.ones_like(ids)}
args = SFTConfig(output_dir="/tmp/out", max_steps=1, per_device_train_batch_size=4, report_to=[], save_strategy="no", use_cpu=True, dataset_kwargs={"skip_prepare_dataset": True})
SFTTrainer(model=model, args=args, processing_class=tokenizer, train_dataset=Dataset.from_list([{"input_ids": [1, 2, 3, 4]}] * 4), data_collator=collate).train()
`;
    writeFileSync(join(workspace, 'sft_trl.py'), script);
    const output: Buffer[] = [];
    const job = sandbox.exec({
      command: ['python', 'sft_trl.py'],
      limits: { cpus: 1, memoryBytes: 4 * 2 ** 30, pids: 256, gpus: [] },
      env: { [traceJobVariable]: '1', HF_HUB_OFFLINE: '1' },
      output: { write: (chunk) => output.push(chunk) },
      tag: 'route-trl',
    });
    expect((await job.exited).exitCode, Buffer.concat(output).toString()).toBe(0);
    expect(keepJobTrace(runDir, workspace, 1)).toBe(true);
    const trace = readJobTrace(runDir, 1)!;
    expect(trace.trainers).toEqual({ built: ['SFTTrainer'], trained: ['SFTTrainer'] });
    const files = { 'sft_trl.py': script };
    // What the words said, and what ran.
    expect(readRoute('python sft_trl.py', files).route).toBe('grpo');
    expect(routeFromTrace(trace, new Set(), 'python sft_trl.py', files)).toMatchObject({ route: 'sft', undecided: false });
    expect(routeFromTrace(trace, new Set(), 'python sft_trl.py', files)!.basis).toContain('SFTTrainer trained');
  }, 300_000);
});

/** Waits for a job to end (job_status waits up to 45 s a call). */
async function finished(served: InProcessRun, jobId: number): Promise<void> {
  for (;;) {
    const status = await call(served.client, 'job_status', { job_id: jobId, wait_seconds: 45 });
    if ((status.structured.jobs as Array<{ state: string }>)[0]!.state !== 'running') return;
  }
}

describe("trl.experimental's trainers", () => {
  /** Trainers that train no policy (a process reward model): read as the trace says, like transformers' Trainer. */
  const notPolicies = ['PRMTrainer'];
  const trained = (name: string): JobTrace => ({
    python: true,
    programs: [['python3', 'train.py']],
    trainers: { built: [name], trained: [name] },
    gradients: 3,
    online: true,
    reads: [],
  });

  it('each of the installed trl maps to its route, by what it trains on', () => {
    const [site] = readdirSync(join(packageRoot, '.venv-full', 'lib')).map((python) =>
      join(packageRoot, '.venv-full', 'lib', python, 'site-packages'),
    );
    const experimental = join(site!, 'trl', 'experimental');
    expect(existsSync(experimental), `${experimental} is missing: run \`npm run setup\` (it builds .venv-full)`).toBe(true);
    const names = new Set<string>();
    for (const file of readdirSync(experimental, { recursive: true, encoding: 'utf8' }).filter((path) => path.endsWith('.py'))) {
      for (const match of readFileSync(join(experimental, file), 'utf8').matchAll(/^class (\w+Trainer)\b/gm)) names.add(match[1]!);
    }
    expect(names.size).toBeGreaterThan(10);
    expect([...names].filter((name) => !trainerRoutes[name] && !notPolicies.includes(name)).sort()).toEqual([]);
    const routeOf = (name: string) => routeFromTrace(trained(name), new Set(), 'python3 train.py', { 'train.py': 'trainer.train()' });
    expect(routeOf('GMPOTrainer')).toMatchObject({ route: 'grpo', basis: "trl's GMPOTrainer trained (job trace)" });
    expect(routeOf('A2POTrainer')?.route).toBe('reinforce');
    expect(routeOf('XPOTrainer')?.route).toBe('dpo');
    expect(routeOf('GKDTrainer')?.route).toBe('sft');
    // A process reward model's training is read as any other: here, given data and no reward named.
    expect(routeOf('PRMTrainer')?.route).toBe('sft');
  });
});
