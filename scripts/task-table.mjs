// Renders the README's task tables from the tasks' declarations (tasks/*/task.json): the micro tier's between the lines
// <!-- tasks:begin --> and <!-- tasks:end --> of README.md, the full tier's between <!-- full-tasks:begin --> and
// <!-- full-tasks:end -->:
//   node scripts/task-table.mjs            rewrite the table (npm run tasks:table)
//   node scripts/task-table.mjs --check    exit 1, naming the command, when README.md's table is not what task.json says
//   --root DIR                             the repository to read (default: this one); README.md and tasks/ are under it
// A row per folder of tasks/ holding a micro-tier task.json (as the server's listTaskIds('micro') finds them), ordered by level, then id:
// id, level and summary, paperTask, figures.baseline (public / private, with the metric), and each route's oracle
// (oracles[].measured: SFT on the training answers, reward-only from the task's reward alone; "none" where a task has none),
// with what one demo of it used (oracles[].compute: CPU-seconds, wall time, rollout episodes).
// A row per full-tier task, ordered the same way: id, level and summary, paperTask, the prepare command, defaultModel,
// gpuMemory (what the default model needs) and upstreamStatus (what has run against the real upstream data and packages).
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const MARKERS = {
  micro: ['<!-- tasks:begin -->', '<!-- tasks:end -->'],
  full: ['<!-- full-tasks:begin -->', '<!-- full-tasks:end -->'],
};
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

/** The micro tier's fields the table shows, or the full tier's; a task lacking one is named. */
const requiredFields = {
  micro: ['id', 'level', 'summary', 'paperTask', 'metric', 'figures'],
  full: ['id', 'level', 'summary', 'paperTask', 'defaultModel', 'gpuMemory', 'upstreamStatus'],
};

/** Each tier's tasks, checked for what their table shows. */
function readTasks(tasksDir) {
  const tasks = readdirSync(tasksDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(tasksDir, entry.name, 'task.json')))
    .map((entry) => {
      const file = join(tasksDir, entry.name, 'task.json');
      const task = JSON.parse(readFileSync(file, 'utf8'));
      const tier = task.tier === 'full' ? 'full' : 'micro';
      const missing = requiredFields[tier].filter((key) => task[key] === undefined);
      if (tier === 'micro') {
        const baseline = task.figures?.baseline ?? {};
        if (typeof baseline.public !== 'number' || typeof baseline.private !== 'number') missing.push('figures.baseline.public/private');
        const declared = (o) =>
          typeof o.route === 'string' && typeof o.measured === 'string' && ['cpuSeconds', 'wallSeconds', 'rolloutEpisodes'].every((k) => typeof o.compute?.[k] === 'number');
        if (!Array.isArray(task.oracles) || !task.oracles.every(declared)) missing.push('oracles[].route/measured/compute');
      }
      if (missing.length) fail(`${file} lacks ${missing.join(', ')}, which the README's task table shows`);
      return { tier, task };
    })
    .sort((a, b) => a.task.level - b.task.level || a.task.id.localeCompare(b.task.id));
  return {
    micro: tasks.filter((t) => t.tier === 'micro').map((t) => t.task),
    full: tasks.filter((t) => t.tier === 'full').map((t) => t.task),
  };
}

const count = (n) => n.toLocaleString('en-US');
const minutes = (s) => (s < 90 ? `${Math.round(s)} s` : `${Math.round(s / 6) / 10} min`);

/** One demo's compute, as the oracle cells show it: "219 CPU-s, 2.1 min, 9,600 episodes". */
function computeUsed({ cpuSeconds, wallSeconds, rolloutEpisodes }) {
  return [`${count(Math.round(cpuSeconds))} CPU-s`, minutes(wallSeconds), ...(rolloutEpisodes ? [`${count(rolloutEpisodes)} episodes`] : [])].join(', ');
}

/** Rows as a Markdown table, its columns padded to their widest cell. */
function markdownTable(rows) {
  const widths = rows[0].map((_, col) => Math.max(3, ...rows.map((row) => row[col].length)));
  const line = (cells) => `| ${cells.map((cell, col) => cell.padEnd(widths[col])).join(' | ')} |`;
  return [line(rows[0]), line(widths.map((w) => '-'.repeat(w))), ...rows.slice(1).map(line)].join('\n');
}

/** The micro tier's table: figures measured by the demos. */
function microTable(tasks) {
  return markdownTable([
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
  ]);
}

/** The full tier's table: how to prepare each task, what it needs, what has run against upstream. */
function fullTable(tasks) {
  return markdownTable([
    ['task', 'level', 'paper task', 'prepare', 'default base model', 'GPU memory at the default model', 'run against upstream'],
    ...tasks.map((t) => [
      `\`${t.id}\``,
      `${t.level} (${t.summary})`,
      t.paperTask,
      `\`a2rl prepare ${t.id}\``,
      `\`${t.defaultModel}\``,
      t.gpuMemory,
      t.upstreamStatus,
    ]),
  ]);
}

/** The README with each tier's table put between its markers. */
function render(readme, readmePath, tables) {
  let out = readme;
  for (const [tier, table] of Object.entries(tables)) {
    const [BEGIN, END] = MARKERS[tier];
    const begin = out.indexOf(BEGIN);
    const end = out.indexOf(END);
    if (begin < 0 || end < begin) fail(`${readmePath} needs the lines ${BEGIN} and ${END} around the ${tier} tier's task table`);
    out = `${out.slice(0, begin + BEGIN.length)}\n${table}\n${out.slice(end)}`;
  }
  return out;
}

const args = parseArgs(process.argv.slice(2));
const readmePath = join(args.root, 'README.md');
const readme = readFileSync(readmePath, 'utf8');
const tasks = readTasks(join(args.root, 'tasks'));
const rendered = render(readme, readmePath, { micro: microTable(tasks.micro), full: fullTable(tasks.full) });
if (args.check) {
  if (rendered !== readme) {
    fail(`${readmePath}: the task tables are out of date with tasks/*/task.json; run \`${COMMAND}\` (npm run tasks:table).`, 1);
  }
  console.log(`${readmePath}: the task table matches tasks/*/task.json`);
} else if (rendered !== readme) {
  writeFileSync(readmePath, rendered);
  console.log(`${readmePath}: task table rewritten`);
} else {
  console.log(`${readmePath}: task table already up to date`);
}
