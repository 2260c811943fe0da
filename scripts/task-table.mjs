// Renders the README's task table from the tasks' declarations (tasks/*/task.json), between the lines
// <!-- tasks:begin --> and <!-- tasks:end --> of README.md:
//   node scripts/task-table.mjs            rewrite the table (npm run tasks:table)
//   node scripts/task-table.mjs --check    exit 1, naming the command, when README.md's table is not what task.json says
//   --root DIR                             the repository to read (default: this one); README.md and tasks/ are under it
// A row per folder of tasks/ holding a micro-tier task.json (as the server's listTaskIds('micro') finds them), ordered by level, then id:
// id, level and summary, paperTask, figures.baseline (public / private, with the metric), and each route's oracle
// (oracles[].measured: SFT on the training answers, reward-only from the task's reward alone; "none" where a task has none),
// with what one demo of it used (oracles[].compute: CPU-seconds, wall time, rollout episodes).
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const BEGIN = '<!-- tasks:begin -->';
const END = '<!-- tasks:end -->';
const COMMAND = 'node scripts/task-table.mjs';

function fail(message, code = 2) {
  console.error(message);
  process.exit(code);
}

function parseArgs(argv) {
  const args = { check: false, root: join(dirname(fileURLToPath(import.meta.url)), '..') };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--check') args.check = true;
    else if (argv[i] === '--root' && i + 1 < argv.length) args.root = argv[++i];
    else fail(`unknown argument ${argv[i]}; usage: ${COMMAND} [--check] [--root DIR]`);
  }
  return args;
}

function readTasks(tasksDir) {
  return readdirSync(tasksDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(tasksDir, entry.name, 'task.json')))
    .map((entry) => {
      const file = join(tasksDir, entry.name, 'task.json');
      return { file, task: JSON.parse(readFileSync(file, 'utf8')) };
    })
    // The table shows the micro tier's figures; full-tier tasks have no shipped baseline or oracle figures yet (issue 17).
    .filter(({ task }) => task.tier !== 'full')
    .map(({ file, task }) => {
      const missing = ['id', 'level', 'summary', 'paperTask', 'metric', 'figures'].filter((key) => task[key] === undefined);
      const baseline = task.figures?.baseline ?? {};
      if (typeof baseline.public !== 'number' || typeof baseline.private !== 'number') missing.push('figures.baseline.public/private');
      const declared = (o) =>
        typeof o.route === 'string' && typeof o.measured === 'string' && ['cpuSeconds', 'wallSeconds', 'rolloutEpisodes'].every((k) => typeof o.compute?.[k] === 'number');
      if (!Array.isArray(task.oracles) || !task.oracles.every(declared)) missing.push('oracles[].route/measured/compute');
      if (missing.length) fail(`${file} lacks ${missing.join(', ')}, which the README's task table shows`);
      return task;
    })
    .sort((a, b) => a.level - b.level || a.id.localeCompare(b.id));
}

const count = (n) => n.toLocaleString('en-US');
const minutes = (s) => (s < 90 ? `${Math.round(s)} s` : `${Math.round(s / 6) / 10} min`);

/** One demo's compute, as the oracle cells show it: "219 CPU-s, 2.1 min, 9,600 episodes". */
function computeUsed({ cpuSeconds, wallSeconds, rolloutEpisodes }) {
  return [`${count(Math.round(cpuSeconds))} CPU-s`, minutes(wallSeconds), ...(rolloutEpisodes ? [`${count(rolloutEpisodes)} episodes`] : [])].join(', ');
}

/** The table as Markdown, its columns padded to their widest cell. */
function renderTable(tasks) {
  const rows = [
    ['task', 'level', 'paper task', 'baseline, public / private', 'SFT oracle', 'reward-only oracle'],
    ...tasks.map((t) => [
      `\`${t.id}\``,
      `${t.level} (${t.summary})`,
      t.paperTask,
      `${t.figures.baseline.public} / ${t.figures.baseline.private} ${t.metric}`,
      ...['sft', 'reward-only'].map((route) => {
        const oracle = t.oracles.find((o) => o.route === route);
        return oracle ? `${oracle.measured}; ${computeUsed(oracle.compute)}` : 'none';
      }),
    ]),
  ];
  const widths = rows[0].map((_, col) => Math.max(3, ...rows.map((row) => row[col].length)));
  const line = (cells) => `| ${cells.map((cell, col) => cell.padEnd(widths[col])).join(' | ')} |`;
  return [line(rows[0]), line(widths.map((w) => '-'.repeat(w))), ...rows.slice(1).map(line)].join('\n');
}

const args = parseArgs(process.argv.slice(2));
const readmePath = join(args.root, 'README.md');
const readme = readFileSync(readmePath, 'utf8');
const begin = readme.indexOf(BEGIN);
const end = readme.indexOf(END);
if (begin < 0 || end < begin) fail(`${readmePath} needs the lines ${BEGIN} and ${END} around the task table`);
const table = renderTable(readTasks(join(args.root, 'tasks')));
const rendered = `${readme.slice(0, begin + BEGIN.length)}\n${table}\n${readme.slice(end)}`;
if (args.check) {
  if (rendered !== readme) {
    fail(`${readmePath}: the task table is out of date with tasks/*/task.json; run \`${COMMAND}\` (npm run tasks:table).`, 1);
  }
  console.log(`${readmePath}: the task table matches tasks/*/task.json`);
} else if (rendered !== readme) {
  writeFileSync(readmePath, rendered);
  console.log(`${readmePath}: task table rewritten`);
} else {
  console.log(`${readmePath}: task table already up to date`);
}
