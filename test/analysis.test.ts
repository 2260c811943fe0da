import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { analyzeRun, detectRoute, hyperparametersOf, type RunEvent, type RunFacts } from '../src/reports/analysis.js';
import { readRoute } from '../src/reports/route.js';
import { SafeDir } from '../src/util/safe-fs.js';
import { codeSnapshotsOf } from '../src/store/code-snapshots.js';
import { parseNvidiaSmi } from '../src/jobs/gpu-usage.js';
import { tempDir } from './helpers/sandbox.js';

/** A hand-built run record: `at` in seconds from the run's start. */
class EventLog {
  readonly events: RunEvent[] = [];
  private nextJob = 1;
  private nextSubmission = 1;

  add(at: number, kind: string, name: string, data: Record<string, unknown> = {}): this {
    this.events.push({ t_rel_ms: at * 1000, kind, name, data });
    return this;
  }

  job(
    kind: string,
    command: string,
    start: number,
    end: number,
    end_state = 'succeeded',
    extra: { cpu_s?: number; episodes?: number; tree?: string } = {},
  ): number {
    const id = this.nextJob++;
    this.add(start, 'job', 'started', { job_id: id, kind, command, charged: kind !== 'grading' });
    if (extra.tree) this.add(start, 'snapshot', 'code', { job_id: id, tree: extra.tree });
    this.add(end, 'job', 'finished', {
      job_id: id,
      kind,
      state: end_state,
      exit_code: end_state === 'succeeded' ? 0 : 1,
      cpu_s: extra.cpu_s ?? end - start,
      gpu_s: 0,
      episodes_done: extra.episodes ?? null,
    });
    return id;
  }

  submit(at: number, outcome: { public: number; private: number } | 'failed', gradedAt = at + 10): number {
    const id = this.nextSubmission++;
    this.add(at, 'submission', 'queued', { submission_id: id, path: 'output/final' });
    if (outcome === 'failed') this.add(gradedAt, 'submission', 'failed', { submission_id: id, error: 'grader crashed' });
    else this.add(gradedAt, 'submission', 'graded', { submission_id: id, public_score: outcome.public, private_score: outcome.private });
    return id;
  }
}

const limits = { wallSeconds: 1200, computeSeconds: 1200, submissions: 5, rolloutEpisodes: 1000 };

function facts(record: EventLog, extra: Partial<RunFacts> = {}): RunFacts {
  return {
    run: {
      id: 'r',
      task: 'micro-gsm8k',
      label: 'test',
      agent: null,
      agent_version: null,
      driver_model: null,
      state: 'ended',
      end_reason: 'wall-clock budget exhausted',
      limits,
      ended_ms: 1200_000,
    },
    baseline: { public: 10, private: 12 },
    events: record.events,
    logs: {},
    code: {},
    ...extra,
  };
}

const sft = {
  'train.py':
    'import torch\n# supervised fine-tuning\nparser.add_argument("--lr", type=float, default=2e-3)\nparser.add_argument("--steps", type=int, default=600)\n',
};

describe('run metrics from hand-built records', () => {
  it('a run with no submission: no scores, no rates, failure "time out with no submission"', () => {
    const record = new EventLog().add(0, 'run', 'created').add(3, 'tool', 'read_instructions', { duration_ms: 3 });
    record.job('training', 'python3 code/train.py', 10, 400, 'succeeded', { cpu_s: 600 });
    const a = analyzeRun(facts(record));
    expect(a.metrics.best).toBeNull();
    expect(a.metrics.last).toBeNull();
    expect(a.metrics.improvement_best).toBeNull();
    expect(a.metrics.valid_submission_rate).toBeNull();
    expect(a.metrics.time_to_first_valid_s).toBeNull();
    expect(a.metrics.time_to_best_s).toBeNull();
    expect(a.metrics.monotonic_ratio).toBeNull();
    expect(a.metrics.gap_to_budget_end_s).toBeNull();
    expect(a.metrics.budget_share).toEqual({ wall: 1, compute: 0.5, submissions: 0, rollout_episodes: 0 });
    expect(a.metrics.compute_s).toBe(600);
    expect(a.metrics.training_jobs).toBe(1);
    expect(a.metrics.training_failure_rate).toBe(0);
    expect(a.iterations).toEqual([]);
    expect(a.failure_type).toBe('timeout_no_submission');
  });

  it('all training fails and every submission fails grading: rates are zero, failure is a code error', () => {
    const record = new EventLog();
    const j1 = record.job('training', 'python3 code/train.py', 10, 20, 'failed', { tree: 't1' });
    record.job('training', 'python3 code/train.py --lr 1e-3', 30, 40, 'oom_killed', { tree: 't1' });
    record.submit(50, 'failed');
    const a = analyzeRun(
      facts(record, { logs: { [j1]: { error: true, nonFinite: false, errorLine: 'NameError: x' } }, code: { t1: sft } }),
    );
    expect(a.metrics.training_jobs).toBe(2);
    expect(a.metrics.training_failures).toBe(2);
    expect(a.metrics.training_failure_rate).toBe(1);
    expect(a.metrics.submissions).toBe(1);
    expect(a.metrics.valid_submissions).toBe(0);
    expect(a.metrics.valid_submission_rate).toBe(0);
    expect(a.metrics.best).toBeNull();
    // No training succeeded: what was submitted can only be an untrained copy.
    expect(a.iterations[0]).toMatchObject({ route: 'copy_of_base', outcome: 'grading_failed', failure_type: 'copy_model_fallback' });
    expect(a.failure_type).toBe('copy_model_fallback');
  });

  it('a failed job with a traceback before a trained submission that did not beat the baseline is a code error', () => {
    const record = new EventLog();
    record.job('training', 'python3 code/train.py', 10, 100, 'succeeded', { tree: 't1' });
    record.submit(110, { public: 20, private: 20 });
    const broken = record.job('training', 'python3 code/train.py --lr 1', 120, 130, 'failed', { tree: 't1' });
    record.job('training', 'python3 code/train.py --lr 0.5', 140, 300, 'succeeded', { tree: 't1' });
    record.submit(310, { public: 8, private: 9 });
    const a = analyzeRun(
      facts(record, { logs: { [broken]: { error: true, nonFinite: false, errorLine: 'RuntimeError: boom' } }, code: { t1: sft } }),
    );
    expect(a.iterations.map((it) => it.outcome)).toEqual(['new_best', 'not_above_baseline']);
    expect(a.iterations[1]).toMatchObject({ route: 'sft', failure_type: 'code_error', hyperparameters: { lr: 0.5, steps: 600 } });
    expect(a.iterations[1]!.evidence).toContain('RuntimeError: boom');
    expect(a.failure_type).toBeNull();
  });

  it('one submission at the last second: all times equal, no gap to the budget end', () => {
    const record = new EventLog();
    record.job('training', 'python3 code/train.py', 0, 1100, 'succeeded', { cpu_s: 1100, tree: 't1' });
    record.submit(1200, { public: 30, private: 28 }, 1250);
    const a = analyzeRun(facts(record, { code: { t1: sft } }));
    expect(a.metrics.time_to_first_valid_s).toBe(1200);
    expect(a.metrics.time_to_first_improvement_s).toBe(1200);
    expect(a.metrics.time_to_best_s).toBe(1200);
    expect(a.metrics.gap_to_budget_end_s).toBe(0);
    expect(a.metrics.improvement_best).toEqual({ public: 20, private: 16 });
    expect(a.metrics.improvement_last).toEqual({ public: 20, private: 16 });
    expect(a.metrics.monotonic_ratio).toBeNull();
    expect(a.metrics.valid_submission_rate).toBe(1);
    expect(a.iterations[0]).toMatchObject({ route: 'sft', outcome: 'new_best', failure_type: null });
    expect(a.failure_type).toBeNull();
  });

  it('best, last, times, monotonic ratio, copies of the base model, budget shares and rollout episodes', () => {
    const record = new EventLog();
    record.add(5, 'tool', 'submit_artifact', {
      error: '[INVALID_INPUT] models/base is the base model unchanged (its score, the baseline, is 10); submitting it is refused.',
    });
    record.job('exec', 'ls', 1, 2, 'succeeded', { cpu_s: 0.5 });
    record.job('training', 'python3 code/train.py', 10, 100, 'succeeded', { cpu_s: 150, tree: 't1' });
    record.job('rollouts', 'python3 -m micro_gsm8k.rollouts', 110, 130, 'succeeded', { cpu_s: 30, episodes: 64 });
    record.add(130, 'rollouts', 'batch', { job_id: 3, episodes: 64, mean_reward: 0.3, out: 'rollouts/batch-001.jsonl' });
    record.job('grading', 'grade', 135, 160, 'succeeded', { cpu_s: 40 });
    record.submit(140, { public: 10, private: 12 }); // scores exactly the baseline: a copy
    record.submit(200, { public: 35, private: 33 });
    record.submit(300, { public: 30, private: 31 });
    record.submit(400, { public: 50, private: 45 });
    const a = analyzeRun(facts(record, { code: { t1: sft } }));
    expect(a.metrics.best).toMatchObject({ submission_id: 4, public: 50, private: 45, t_s: 400 });
    expect(a.metrics.last).toMatchObject({ submission_id: 4 });
    expect(a.metrics.time_to_first_valid_s).toBe(140);
    expect(a.metrics.time_to_first_improvement_s).toBe(200);
    expect(a.metrics.time_to_best_s).toBe(400);
    // Pairs: 10→35 up, 35→30 down, 30→50 up.
    expect(a.metrics.monotonic_ratio).toBeCloseTo(2 / 3, 3);
    expect(a.metrics.base_model_copies).toBe(2);
    // Grading is not charged: 0.5 + 150 + 30.
    expect(a.metrics.compute_s).toBe(180.5);
    expect(a.metrics.rollout_episodes).toBe(64);
    expect(a.metrics.rollout_batches).toBe(1);
    expect(a.metrics.budget_share.submissions).toBe(0.8);
    expect(a.metrics.budget_share.rollout_episodes).toBe(0.064);
    expect(a.metrics.gap_to_budget_end_s).toBe(800);
    expect(a.metrics.tool_calls).toBe(1);
    expect(a.metrics.tool_errors).toBe(1);
    expect(a.iterations[0]).toMatchObject({
      route: 'copy_of_base',
      failure_type: 'copy_model_fallback',
      uses_rollouts: true,
      rollout_episodes: 64,
    });
    expect(a.iterations.map((it) => it.outcome)).toEqual(['not_above_baseline', 'new_best', 'above_baseline', 'new_best']);
    // Later submissions came from the same training job: it counts for each.
    expect(a.iterations[3]!.training_jobs.map((j) => j.job_id)).toEqual([2]);
    expect(a.submissions.map((s) => s.compute_s)).toEqual([180.5, 180.5, 180.5, 180.5]);
  });

  it('a diverged RL run: nan in the log names the failure, and the route is read from the code', () => {
    const record = new EventLog();
    const job = record.job('training', 'python3 code/grpo.py --kl-coef 0.05 --group-size 8', 10, 100, 'succeeded', { tree: 't2' });
    record.submit(110, { public: 2, private: 3 });
    const a = analyzeRun(
      facts(record, {
        logs: { [job]: { error: false, nonFinite: true, errorLine: null } },
        code: { t2: { 'grpo.py': 'adv = (r - r.mean()) / r.std()  # group relative\nLR = 1e-4\n', 'old_sft.py': 'supervised' } },
      }),
    );
    expect(a.iterations[0]).toMatchObject({
      route: 'grpo',
      failure_type: 'training_diverged',
      hyperparameters: { lr: 0.0001, kl_coef: 0.05, group_size: 8 },
    });
    expect(a.failure_type).toBe('training_diverged');
  });

  it('an RL route that ran cleanly and did not beat the baseline points at the rollout logic', () => {
    const record = new EventLog();
    record.job('rollouts', 'python3 -m micro_gsm8k.rollouts', 5, 20, 'succeeded', { episodes: 32 });
    record.job('training', 'python3 code/pg.py', 30, 100, 'succeeded', { tree: 't3' });
    record.submit(110, { public: 9, private: 11 });
    const a = analyzeRun(
      facts(record, { code: { t3: { 'pg.py': 'loss = -(log_probs * rewards).mean()  # reads rollouts/batch-001.jsonl' } } }),
    );
    expect(a.iterations[0]).toMatchObject({ route: 'reinforce', uses_rollouts: true, failure_type: 'rollout_logic_wrong' });
  });

  it('is deterministic: the same record gives the same summary', () => {
    const record = new EventLog();
    record.job('training', 'python3 code/train.py', 10, 100, 'succeeded', { tree: 't1' });
    record.submit(110, { public: 20, private: 20 });
    expect(JSON.stringify(analyzeRun(facts(record, { code: { t1: sft } })))).toBe(
      JSON.stringify(analyzeRun(facts(record, { code: { t1: sft } }))),
    );
  });
});

describe('route and hyperparameter detection', () => {
  it.each([
    ['from ppo import x; ratio.clamp(1 - clip_eps, 1 + clip_eps)', 'ppo'],
    ['# GRPO with group-normalised advantages', 'grpo'],
    ['loss = -(advantages * log_prob).sum()  # REINFORCE', 'reinforce'],
    ['loss = F.cross_entropy(logits, targets)', 'sft'],
    ['"""Expert iteration: fine-tune on the rewarded rollouts."""\nloss = F.cross_entropy(logits, targets)', 'expert_iteration'],
    ['keep = [e for e in episodes if e["reward"] == 1.0]  # rejection sampling', 'expert_iteration'],
    ['print("hello")', 'unknown'],
  ])('%s → %s', (source, route) => {
    expect(detectRoute(source)).toBe(route);
  });

  it('command flags override argparse defaults and constants', () => {
    const code =
      'BATCH_SIZE = 16\nparser.add_argument("--learning-rate", type=float, default=3e-4)\nparser.add_argument("--epochs", default=2)\n';
    expect(hyperparametersOf('python3 code/train.py --epochs 5 --temperature=0.7', code)).toEqual({
      batch_size: 16,
      lr: 0.0003,
      epochs: 5,
      temperature: 0.7,
    });
  });
});

/** A script with two training modes: GRPO, and rejection sampling (fine-tuning on its own rewarded samples). */
const mixed = `"""Post-train the policy with GRPO or with rejection-sampling fine-tuning (RFT)."""
import argparse
from rl_utils import group_advantages, keep_rewarded

def train_grpo(model, batch, args):
    # group relative advantages, KL to the reference
    adv = group_advantages(batch.rewards, args.group_size)
    return policy_loss(model, batch, adv)

def train_rft(model, batch, args):
    kept = keep_rewarded(batch)
    return F.cross_entropy(model(kept.inputs), kept.targets)

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["grpo", "rft"], default="grpo", help="grpo or rft (rejection sampling)")
    parser.add_argument("--group-size", type=int, default=8)
    args = parser.parse_args()
    for batch in batches():
        if args.mode == "grpo":
            loss = train_grpo(model, batch, args)
        elif args.mode == "rft":
            loss = train_rft(model, batch, args)
        else:
            raise ValueError(f"unknown mode {args.mode}")
        loss.backward()

if __name__ == "__main__":
    main()
`;
const rlUtils = `def group_advantages(rewards, size):
    # GRPO: normalise within each group
    r = rewards.view(-1, size)
    return (r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-6)

def keep_rewarded(batch):
    """Rejection sampling: keep the completions whose reward is 1."""
    return batch.filter(lambda e: e.reward == 1.0)
`;
const mixedFiles = { 'train.py': mixed, 'rl_utils.py': rlUtils };

describe('the route that ran: the command and the code path it selects', () => {
  it('a mixed GRPO/RFT script is read along the mode its command chose; without --mode, along the default', () => {
    const route = (command: string) => readRoute(command, mixedFiles);
    expect(route('python3 code/train.py --mode rft --group-size 4')).toMatchObject({ route: 'expert_iteration', undecided: false });
    expect(route('python3 code/train.py --mode rft').basis).toContain('args.mode == "rft"');
    expect(route('python3 code/train.py --mode=grpo').route).toBe('grpo');
    expect(route('python3 code/train.py').route).toBe('grpo');
    expect(route('cd code && accelerate launch --num_processes 1 train.py --mode rft').route).toBe('expert_iteration');
    expect(route('nohup timeout -s KILL 600 python3 -u /workspace/code/train.py --mode rft > log 2>&1 &').route).toBe('expert_iteration');
    // The whole script's words say GRPO first: what a keyword reading names whatever ran.
    expect(detectRoute(mixed)).toBe('grpo');
  });

  it('says unknown when the command does not fix the mode, or the dispatch cannot be read', () => {
    const shellVariable = readRoute('python3 code/train.py --mode "$MODE"', mixedFiles);
    expect(shellVariable).toMatchObject({ route: 'unknown', undecided: true });
    expect(shellVariable.basis).toMatch(/grpo or expert_iteration|expert_iteration or grpo/);
    const table = mixed.replace(
      /if args\.mode == "grpo":[^]*?raise ValueError\(f"unknown mode \{args\.mode\}"\)/,
      'loss = {"grpo": train_grpo, "rft": train_rft}[args.mode](model, batch, args)',
    );
    expect(table).not.toContain('elif');
    const handlers = readRoute('python3 code/train.py --mode rft', { 'train.py': table, 'rl_utils.py': rlUtils });
    expect(handlers).toMatchObject({ route: 'unknown', undecided: true });
    expect(handlers.basis).toContain('mode=rft of grpo|rft');
    // Two programs the snapshot holds, and a command that starts neither by name.
    expect(readRoute('python3 -c "import runpy"', { 'grpo.py': '# GRPO', 'sft.py': 'loss = F.cross_entropy(x, y)' }).route).toBe('unknown');
  });

  it('reads environment variables, constants, flags and match statements, and follows shell scripts of the snapshot', () => {
    const byEnvironment = `import os
ALGO = os.environ.get("ALGO", "sft")
def sft(): return F.cross_entropy(logits, y)
def grpo(): return group_relative_advantages()
if ALGO == "grpo":
    grpo()
else:
    sft()
`;
    expect(readRoute('ALGO=grpo python3 code/t.py', { 't.py': byEnvironment }).route).toBe('grpo');
    expect(readRoute('python3 code/t.py', { 't.py': byEnvironment }).route).toBe('sft');
    expect(readRoute('bash code/run.sh', { 't.py': byEnvironment, 'run.sh': 'export ALGO=grpo\npython3 code/t.py\n' }).route).toBe('grpo');
    const byConstant = byEnvironment.replace('os.environ.get("ALGO", "sft")', '"grpo"');
    expect(readRoute('python3 code/t.py', { 't.py': byConstant }).route).toBe('grpo');
    const byFlag = `import argparse
p = argparse.ArgumentParser()
p.add_argument("--reinforce", action="store_true")
args = p.parse_args()
if args.reinforce:
    loss = -(log_probs * rewards).mean()
else:
    loss = F.cross_entropy(logits, targets)  # supervised
`;
    expect(readRoute('python3 code/t.py --reinforce', { 't.py': byFlag }).route).toBe('reinforce');
    expect(readRoute('python3 code/t.py', { 't.py': byFlag }).route).toBe('sft');
    const byMatch = `import click
@click.command()
@click.option("--algo", type=click.Choice(["ppo", "sft"]), default="sft")
def main(algo):
    match algo:
        case "ppo":
            ppo_step()  # value head and clipped ratio
        case _:
            F.cross_entropy(logits, targets)
def ppo_step(): pass
main()
`;
    expect(readRoute('python3 code/m.py --algo ppo', { 'm.py': byMatch }).route).toBe('ppo');
    expect(readRoute('python3 code/m.py', { 'm.py': byMatch }).route).toBe('sft');
  });

  it('an iteration names the route of the job that trained its model, with the basis', () => {
    const record = new EventLog();
    record.job('training', 'python3 code/train.py --mode rft', 10, 100, 'succeeded', { tree: 'm' });
    record.submit(110, { public: 20, private: 21 });
    record.job('training', 'python3 code/train.py --mode grpo', 120, 200, 'succeeded', { tree: 'm' });
    record.submit(210, { public: 30, private: 31 });
    record.job('training', 'python3 code/train.py --mode $NEXT', 220, 300, 'succeeded', { tree: 'm' });
    record.submit(310, { public: 25, private: 24 });
    // Two trainings before one submission: the one that wrote the submitted folder made the model.
    record.job('training', 'python3 code/train.py --mode grpo --out output/final', 320, 400, 'succeeded', { tree: 'm' });
    record.job('training', 'python3 code/train.py --mode rft --out output/final2', 410, 500, 'succeeded', { tree: 'm' });
    record.submit(510, { public: 26, private: 25 });
    const a = analyzeRun(facts(record, { code: { m: mixedFiles } }));
    expect(a.iterations.map((it) => it.route)).toEqual(['expert_iteration', 'grpo', 'unknown', 'grpo']);
    expect(a.iterations[0]!.route_basis).toContain('train.py');
  });
});

describe('code snapshots', () => {
  it('are content-addressed and deduplicated; symlinks and caches are left out', () => {
    const home = tempDir('snap');
    const code = join(home, 'code');
    mkdirSync(join(code, 'lib', '__pycache__'), { recursive: true });
    writeFileSync(join(code, 'train.py'), 'print(1)\n');
    writeFileSync(join(code, 'lib', 'util.py'), 'X = 1\n');
    writeFileSync(join(code, 'lib', '__pycache__', 'util.pyc'), 'junk');
    symlinkSync('/etc/passwd', join(code, 'secrets'));
    const snapshots = codeSnapshotsOf(home);
    const snapshot = () => {
      const read = SafeDir.withTrusted(code, (dir) => snapshots.readFolder(dir));
      snapshots.keep(read);
      return read;
    };
    const first = snapshot();
    expect(first.files.map((f) => f.path)).toEqual(['lib/util.py', 'train.py']);
    expect(first.skipped).toEqual([{ path: 'secrets', reason: 'symlink' }]);
    expect(snapshot().tree).toBe(first.tree);
    writeFileSync(join(code, 'train.py'), 'print(2)\n');
    const second = snapshot();
    expect(second.tree).not.toBe(first.tree);
    // The unchanged file is stored once: three distinct contents in all.
    expect(readdirSync(join(home, 'code-snapshots', 'objects'))).toHaveLength(3);
    const out = join(home, 'out');
    snapshots.materialize(first.tree, out);
    expect(readFileSync(join(out, 'train.py'), 'utf8')).toBe('print(1)\n');
  });
});

describe('GPU readings', () => {
  it('parses nvidia-smi CSV and skips lines it cannot read', () => {
    expect(parseNvidiaSmi('0, 87, 10240\n1, 0, 3\n[N/A], x, y\n')).toEqual([
      { index: 0, utilization_percent: 87, memory_used_mib: 10240 },
      { index: 1, utilization_percent: 0, memory_used_mib: 3 },
    ]);
  });
});
