import { closeSync, copyFileSync, existsSync, fstatSync, mkdirSync, openSync, readSync, writeFileSync, writeSync } from 'node:fs';
import { runIntegrity } from '../integrity/verdict.js';
import { dirname, join } from 'node:path';
import { analyzeRun, loadRunFacts, type RunAnalysis } from './analysis.js';
import { codeSnapshotsOf } from '../store/code-snapshots.js';
import { A2rlError } from '../util/errors.js';
import { startProgress } from '../util/progress.js';
import { renderHtml } from './render.js';
import { loadTimeline, timelineScript, timelineScriptFile } from './timeline.js';
import { jobId } from '../core/job-ids.js';
import { trajectoriesDir } from '../core/rollouts.js';
import { Workspace } from '../core/workspace.js';
import type { Store } from '../store/store.js';
import { baselineGradeOf, publicMetrics, submissionId } from '../core/submissions.js';
import { getTaskFile } from '../tasks/task.js';
import { writeAgentRecord } from '../transcripts/agent-record.js';
import type { PriceTable } from '../transcripts/prices.js';
import { runUsage } from '../transcripts/run-usage.js';

/**
 * Version of the export folder's format (docs/operating.md, "Run exports"); bumped when a file's meaning changes. 2: a
 * job's `job_id` is the store's id in every file (jobs.json's `id`) and `name` the id the agent and the report show.
 */
export const exportFormatVersion = 2;

/** Largest log or trajectory file copied whole; larger ones keep their end (logs) or are left out (trajectories). */
const maxCopiedBytes = 64 * 2 ** 20;

/**
 * Writes one run as a self-contained folder: run.json, events.jsonl, jobs.json, logs/,
 * trajectories/, code/, scores.json, summary.json, report.html (its search in report.js) and the agent's
 * transcript.jsonl and trajectory.json (ATIF). What it writes is read from the store and the run's files; nothing of
 * the run changes. `prices`: the operator's price table, for agents that report tokens but no dollars.
 */
export function exportRun(
  store: Store,
  runId: string,
  outDir: string,
  narrative?: string,
  prices?: PriceTable,
): { dir: string; analysis: RunAnalysis } {
  const run = store.getRun(runId);
  if (!run) throw new A2rlError('NOT_FOUND', `No run "${runId}" in ${store.path}; list the runs with a2rl runs list.`);
  const task = getTaskFile(run.task_id);
  const facts = loadRunFacts(store, runId);
  const analysis = analyzeRun(facts);
  const jobs = store.listJobs(runId);
  const trees = [...new Set([...store.eventPages(runId, 'snapshot')].map((e) => (JSON.parse(e.data) as { tree?: string }).tree))].filter(
    (t): t is string => typeof t === 'string',
  );
  const batches = [...store.eventPages(runId, 'rollouts')]
    .filter((e) => e.name === 'batch')
    .map(
      (e) =>
        JSON.parse(e.data) as {
          job_id?: number;
          episodes: number;
          mean_reward: number | null;
          out: string;
          checkpoint: string;
          trajectories?: { sha256: string; bytes: number } | null;
        },
    );
  const progress = startProgress(`export ${runId}`, jobs.length + trees.length + batches.length + 1);
  try {
    mkdirSync(outDir, { recursive: true });
    const write = (name: string, content: string) => writeFileSync(join(outDir, name), content);
    const { owner: _owner, ...runFields } = run;
    const agentUsage = runUsage(store, runId, prices);
    write(
      'run.json',
      JSON.stringify(
        {
          format_version: exportFormatVersion,
          run: { ...runFields, budget: JSON.parse(run.budget) },
          task: {
            id: task.id,
            level: task.level,
            tier: task.tier,
            metric: task.metric,
            success_margin: task.successMargin,
            grader_version: run.grader_version,
          },
          agent_usage: agentUsage,
        },
        null,
        2,
      ),
    );
    writeEventsJsonl(store, runId, join(outDir, 'events.jsonl'));

    mkdirSync(join(outDir, 'logs'), { recursive: true });
    for (const job of jobs) {
      const log = `logs/${jobId(job)}.log`;
      copyTail(job.log_path, join(outDir, log));
      progress.tick(log);
    }
    write(
      'jobs.json',
      JSON.stringify(
        jobs.map(({ owner: _o, log_path: _l, ...job }) => ({ ...job, name: jobId(job), log: `logs/${jobId(job)}.log` })),
        null,
        2,
      ),
    );

    mkdirSync(join(outDir, 'trajectories'), { recursive: true });
    const workspace = join(run.dir, 'workspace');
    const recorded = trajectoriesDir(dirname(store.path));
    const trajectories = batches.map((batch) => {
      const file = `trajectories/${batch.out.split('/').pop()}`;
      // The server's own copy, as it read the batch; the workspace file only for batches recorded before copies were kept.
      const copy = batch.trajectories ? join(recorded, `${batch.trajectories.sha256}.jsonl`) : null;
      let note: string | undefined;
      if (copy && existsSync(copy)) copyFileSync(copy, join(outDir, file));
      else if (copyFromWorkspace(workspace, batch.out, join(outDir, file))) note = 'from the workspace: no recorded copy';
      else note = 'missing or too large to copy';
      progress.tick(file);
      const job = jobs.find((j) => j.id === batch.job_id);
      return { ...batch, name: job ? jobId(job) : null, file: note === 'missing or too large to copy' ? null : file, note };
    });
    write('trajectories/index.json', JSON.stringify(trajectories, null, 2));

    const snapshots = codeSnapshotsOf(dirname(store.path));
    mkdirSync(join(outDir, 'code'), { recursive: true });
    const codeIndex = trees.map((tree) => {
      snapshots.materialize(tree, join(outDir, 'code', tree));
      progress.tick(`code ${tree.slice(0, 12)}`);
      const { files, skipped } = snapshots.read(tree);
      return { tree, dir: `code/${tree}`, files: files.map((f) => ({ path: f.path, sha256: f.sha256, bytes: f.bytes })), skipped };
    });
    write('code/index.json', JSON.stringify(codeIndex, null, 2));

    const baseline = baselineGradeOf(store, run);
    const scores = {
      baseline: baseline ? { public: baseline.public_score, private: baseline.private_score } : null,
      submissions: store.listSubmissions(runId).map((s) => {
        const grade = s.state === 'graded' ? store.getGrade(task.id, run.grader_version, s.content_hash) : undefined;
        return {
          submission_id: submissionId(s.id),
          path: s.path,
          note: s.note,
          state: s.state,
          error: s.error,
          content_hash: s.content_hash,
          submitted_s: (s.created_at - run.created_at) / 1000,
          graded_s: s.graded_at === null ? null : (s.graded_at - run.created_at) / 1000,
          public: grade?.public_score ?? null,
          private: grade?.private_score ?? null,
          metrics: grade ? publicMetrics(grade.details) : null,
        };
      }),
    };
    write('scores.json', JSON.stringify(scores, null, 2));
    write('summary.json', JSON.stringify({ ...analysis, narrative: narrative ?? null }, null, 2));
    writeAgentRecord(store, runId, outDir, agentUsage);
    const integrity = runIntegrity(store, runId);
    write(
      'integrity.json',
      JSON.stringify(
        {
          ...integrity,
          checks: (['contamination', 'review'] as const).flatMap((kind) => {
            const check = store.latestIntegrityCheck(runId, kind);
            return check ? [{ ...check, details: JSON.parse(check.details) as unknown }] : [];
          }),
        },
        null,
        2,
      ),
    );
    write('report.html', renderHtml(analysis, narrative, loadTimeline(store, runId, facts.events), agentUsage, integrity));
    write(timelineScriptFile, timelineScript);
    progress.tick('report.html');
    return { dir: outDir, analysis };
  } finally {
    progress.stop();
  }
}

/**
 * A run's events as JSON lines, read a page at a time and written a MiB at a time: never one string (V8 caps one at
 * about 512 MiB, which a run of 10⁶ tool calls passes) nor one array.
 */
function writeEventsJsonl(store: Store, runId: string, path: string): void {
  const fd = openSync(path, 'w');
  try {
    let chunk = '';
    for (const event of store.eventPages(runId)) {
      // The recorded data is JSON already: spliced in as it is, not parsed and written again.
      const { data, ...fields } = event;
      chunk += `${JSON.stringify(fields).slice(0, -1)},"data":${data}}\n`;
      if (chunk.length >= 2 ** 20) {
        writeSync(fd, chunk);
        chunk = '';
      }
    }
    writeSync(fd, chunk);
  } finally {
    closeSync(fd);
  }
}

/** Copies a file, or its last `maxCopiedBytes` when larger; a missing file becomes an empty one. */
function copyTail(source: string, target: string): void {
  let fd: number;
  try {
    fd = openSync(source, 'r');
  } catch {
    writeFileSync(target, '');
    return;
  }
  try {
    const size = fstatSync(fd).size;
    const length = Math.min(size, maxCopiedBytes);
    const buffer = Buffer.alloc(length);
    readSync(fd, buffer, 0, length, size - length);
    writeFileSync(target, buffer);
  } finally {
    closeSync(fd);
  }
}

/** Copies a workspace file (never through a symlink, never from outside it) no larger than `maxCopiedBytes`; false when it was not copied. */
function copyFromWorkspace(workspace: string, path: string, target: string): boolean {
  let content: Buffer;
  try {
    content = new Workspace(workspace, []).readBytes(path, maxCopiedBytes + 1);
  } catch {
    return false;
  }
  if (content.length > maxCopiedBytes) return false;
  writeFileSync(target, content);
  return true;
}
