import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, waitScore } from '../helpers/mcp.js';
import { tempDir } from '../helpers/sandbox.js';
import { attack, backends, recordedScores, stdioRun, makeCheckpoint, runToEnd, waitBaseline } from './harness.js';

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

/**
 * A checkpoint whose pickle, if unpickled with code execution, makes the grader report
 * 100 (json.dump is replaced) and still hands back real weights, so the grading would
 * otherwise succeed: only a weights-only load stops it.
 */
const forgedPickleScript = (out: string) => `mkdir -p ${out} && cp models/base/config.json ${out}/ && python3 - <<'EOF'
import io, torch
buffer = io.BytesIO()
torch.save(torch.load('models/base/model.pt', weights_only=True), buffer)
code = ("(setattr(__import__('json'), 'dump', lambda obj, f, **k: f.write("
        "'{\\"public\\": {\\"score\\": 100}, \\"private\\": {\\"score\\": 100}}')), "
        "__import__('torch').load(__import__('io').BytesIO(%r)))[1]" % buffer.getvalue())
class Payload:
    def __reduce__(self):
        return (eval, (code,))
torch.save(Payload(), '${out}/model.pt')
EOF`;

describe.each(backends)('red team, forging results (%s)', (backend) => {
  const home = tempDir('rt-forge');
  let client: Client;
  let workspace: string;
  let legitScore: number;
  const scoresNow = () => recordedScores(home);

  beforeAll(async () => {
    ({ client, workspace } = await stdioRun(home, backend, { budget: 'submissions=8' }));
    await waitBaseline(client);
    await makeCheckpoint(client, 'output/legit', 1.01);
    const submitted = await call(client, 'submit_artifact', { path: 'output/legit' });
    legitScore = (await waitScore(client, submitted.structured.submission_id)).submissions[0].score;
  });

  afterAll(async () => {
    await client?.close();
  });

  it('writes score-like files everywhere it can; the recorded scores do not move', () =>
    attack('forge-results', 'score-like files', backend, async () => {
      const before = scoresNow();
      const score = JSON.stringify({ public: { score: 100 }, private: { score: 100 }, score: 100 });
      for (const path of ['output/result.json', 'score.json', 'output/legit-copy/result.json', 'rollouts/grades.json']) {
        expect((await call(client, 'write_file', { path, content: score })).isError, path).toBe(false);
      }
      const shell = await call(client, 'exec', {
        command: `for p in /opt/a2rl/out/result.json /workspace/../result.json /tmp/result.json /result.json; do (echo '${score}' > $p) 2>/dev/null && echo "wrote $p"; done`,
      });
      expect(shell.structured.output.trim()).toBe('wrote /tmp/result.json');
      const scores = await call(client, 'get_score');
      expect(scores.structured.best.score).toBe(legitScore);
      expect(scores.structured.submissions.map((s: { score: number }) => s.score)).toEqual([legitScore]);
      expect(scoresNow()).toBe(before);
    }));

  it('submits a symlink to the base model or to files outside: refused, nothing stored', () =>
    attack('forge-results', 'symlinked submissions', backend, async () => {
      const before = scoresNow();
      await call(client, 'exec', {
        command: [
          'ln -s ../models/base output/base-link',
          'mkdir -p output/outside && cp models/base/config.json output/outside/ && ln -s /etc/hostname output/outside/model.pt',
          'mkdir -p output/abs && ln -s /workspace/models/base/model.pt output/abs/model.pt && cp models/base/config.json output/abs/',
        ].join(' && '),
      });
      for (const [path, message] of [
        ['output/base-link', /OUTSIDE_WORKSPACE/],
        ['output/outside', /symlink.*cp -L/s],
        ['output/abs', /symlink.*cp -L/s],
        ['models/base', /base model unchanged/],
      ] as const) {
        const refused = await call(client, 'submit_artifact', { path });
        expect(refused.isError, path).toBe(true);
        expect(refused.text, path).toMatch(message);
      }
      expect(scoresNow()).toBe(before);
    }));

  it('cannot hard-link a file from outside the workspace into a submission', () =>
    attack('forge-results', 'hard links to outside files', backend, async () => {
      const before = scoresNow();
      const linked = await call(client, 'exec', {
        command:
          'mkdir -p output/hard && cp models/base/config.json output/hard/; ' +
          'for f in models/base/model.pt /workspace/models/base/model.pt instructions.md /etc/hostname /usr/bin/python3; do ln $f output/hard/model.pt 2>&1 && echo "linked $f"; done; ls output/hard',
      });
      expect(linked.structured.output).not.toMatch(/^linked/m);
      expect(existsSync(join(workspace, 'output/hard/model.pt'))).toBe(false);
      const refused = await call(client, 'submit_artifact', { path: 'output/hard' });
      expect(refused.text).toMatch(/lacks model\.pt/);
      expect(scoresNow()).toBe(before);
    }));

  it('changes the folder right after submitting: the snapshot taken at submission is what is graded', () =>
    attack('forge-results', 'folder changed after submission', backend, async () => {
      await makeCheckpoint(client, 'output/mutable', 1.02);
      const original = sha256(join(workspace, 'output/mutable/model.pt'));
      const submitted = await call(client, 'submit_artifact', { path: 'output/mutable' });
      expect(submitted.isError).toBe(false);
      // Replace the weights with the forged pickle while the submission waits for its grading.
      await runToEnd(client, forgedPickleScript('output/mutable'));
      expect(sha256(join(workspace, 'output/mutable/model.pt'))).not.toBe(original);
      const graded = (await waitScore(client, submitted.structured.submission_id)).submissions[0];
      expect(graded.state).toBe('graded');
      expect(graded.score).toBeLessThan(100);
      const stored = join(home, 'submissions', (await fullHash(submitted.structured.submission_id)) ?? 'missing', 'model.pt');
      expect(sha256(stored)).toBe(original);
    }));

  it('submits a pickle that forges a score of 100 if unpickled with code: the grader loads weights only and fails it', () =>
    attack('forge-results', 'pickled code in a checkpoint', backend, async () => {
      await runToEnd(client, forgedPickleScript('output/pickled'));
      // The attack is real: a loader that runs pickled code would hand back weights and a forged 100.
      const unsafe = await call(client, 'exec', {
        command: `python3 -c "import io, json, torch; sd = torch.load('output/pickled/model.pt', weights_only=False); f = io.StringIO(); json.dump({}, f); print(len(sd), f.getvalue())"`,
      });
      expect(unsafe.structured.output).toMatch(/^\d+ \{"public": \{"score": 100\}/);
      const submitted = await call(client, 'submit_artifact', { path: 'output/pickled' });
      const result = (await waitScore(client, submitted.structured.submission_id)).submissions[0];
      expect(result.state).toBe('failed');
      expect(result).not.toHaveProperty('score');
      const scores = await call(client, 'get_score');
      expect(scores.structured.best.score).toBeLessThan(100);
      const grades = JSON.parse(scoresNow()).grades as Array<{ public_score: number }>;
      expect(grades.every((g) => g.public_score < 100)).toBe(true);
    }));

  /** The full content hash of a submission, from the store. */
  async function fullHash(submissionId: string): Promise<string | undefined> {
    const { submissions } = JSON.parse(scoresNow()) as { submissions: Array<{ seq: number; content_hash: string }> };
    return submissions.find((s) => `sub-${s.seq}` === submissionId)?.content_hash;
  }
});
