import type { JobTrace } from '../jobs/job-trace.js';
import { type CodePath, invocationsOf, readCodePath } from './code-path.js';

/**
 * The training route a job took. Where the job's Python left a trace (src/jobs/job-trace.ts), from what ran: the
 * trainer classes that trained, whether a gradient step ran, and whether its data was the policy's own samples
 * (rollout batches it read, or samples it drew between gradient steps where its code names a reward); only what the
 * trace cannot tell (which update a hand-written loop makes of its samples, whether a reward chose the data, sampling
 * through what the hook does not wrap) is read from the words and
 * idioms of the code path its command selects (code-path.ts). Without a trace, all of it is read from those words.
 * Where the command leaves the path open and the paths differ, the route is `unknown`, never a guess.
 */

/**
 * The routes, defined in docs/operating.md ("Training routes"):
 * - sft: gradient steps on data no reward chose and the policy did not sample;
 * - reward_filtered_sft: the same on data (the task's, an expert's) kept by a reward, return or success;
 * - expert_iteration: fine-tuning on the policy's own rewarded samples (rejection sampling, RFT);
 * - dpo: a preference loss on chosen/rejected pairs (DPO and its kin: IPO, KTO, ORPO, online DPO);
 * - grpo, ppo, reinforce: policy-gradient updates weighted by the policy's own rewards.
 */
export type Route = 'sft' | 'reward_filtered_sft' | 'expert_iteration' | 'dpo' | 'grpo' | 'ppo' | 'reinforce' | 'copy_of_base' | 'unknown';

export interface RouteReading {
  route: Route;
  /** Why: which code was read, and which branch the command chose. */
  basis: string;
  /** The code could take several routes and the command does not say which: unknown, not merely unnamed. */
  undecided: boolean;
}

/** Each route's words and idioms, most specific first: a GRPO script often mentions fine-tuning too. */
const routeSigns: Array<[Route, (text: string) => boolean]> = [
  ['ppo', (t) => /\bppo\b|proximal policy|clip_?(ratio|range|eps)|value[_ ]?(head|loss)|\bgae\b/.test(t)],
  ['grpo', (t) => /grpo|group[_ -]relative/.test(t) || (/group/.test(t) && /advantage/.test(t))],
  [
    'reinforce',
    (t) => /reinforce|policy[_ ]gradient|log_?probs?\s*\*\s*(rewards?|advantages?)|(rewards?|advantages?)\s*\*\s*log_?probs?/.test(t),
  ],
  ['dpo', (t) => /\bdpo\b|direct preference/.test(t) || (/logsigmoid/.test(t) && /\bchosen\b/.test(t) && /\brejected\b/.test(t))],
  ['expert_iteration', (t) => /expert[_ -]iteration|rejection[_ -]sampl|\brft\b|reward(ed)?[_ -](filter|complet|sampl)/.test(t)],
  [
    'reward_filtered_sft',
    // A filter on a reward, return or success (`if … reward …`, in a statement or a comprehension), or behaviour cloning.
    (t) => /behaviou?r[_ -]clon|\bif\b[^\n:]*\b(rewards?|returns?|success)\b/.test(t),
  ],
  ['sft', (t) => /\bsft\b|supervised|cross_entropy|fine-?tun|\bfit\(|teacher.forcing/.test(t)],
];

const allRoutes = routeSigns.map(([route]) => route);

/** Every route a text names, among the given ones. */
export function routesNamed(source: string, among: readonly Route[] = allRoutes): Route[] {
  const text = source.toLowerCase();
  return routeSigns.filter(([route, named]) => among.includes(route) && named(text)).map(([route]) => route);
}

/** The training route a piece of code follows, from the words and idioms it uses (the most specific one it names). */
export function detectRoute(source: string, among: readonly Route[] = allRoutes): Route {
  return routesNamed(source, among)[0] ?? 'unknown';
}

/** Open branches one program's route is read through, at most (see `routeOfPath`). */
const maxOpenAlternatives = 64;

const priority = (route: Route) => {
  const index = routeSigns.findIndex(([r]) => r === route);
  return index === -1 ? routeSigns.length : index;
};

const describeSelectors = (path: CodePath) =>
  path.selectors.map((s) => `${s.name}=${s.value === undefined ? '?' : String(s.value)} of ${s.choices.join('|')}`).join(', ');

/** The route one started program took, with why. */
function routeOfPath(path: CodePath, command: string, among: readonly Route[]): RouteReading {
  if (!path.dispatches) {
    // A selector offering several routes, but no branch on it that can be read: which ran is not known.
    const offered = path.selectors.filter(
      (s) => new Set(s.choices.map((choice) => detectRoute(choice, among)).filter((r) => r !== 'unknown')).size > 1,
    );
    if (offered.length > 0) {
      return {
        route: 'unknown',
        undecided: true,
        basis: `${path.entry} offers ${describeSelectors(path)}, and how it dispatches on that is not read statically`,
      };
    }
    return { route: detectRoute(`${command}\n${path.text}`, among), undecided: false, basis: `keywords in ${path.entry} and its command` };
  }
  // The docstring counts unless it describes several routes (then it describes the script, not this run).
  const base = routesNamed(path.docstring).length > 1 ? path.text : `${path.docstring}\n${path.text}`;
  const chosen = path.chosen.length > 0 ? `, through ${path.chosen.join('; ')}` : '';
  if (path.open.length === 0) {
    return { route: detectRoute(base, among), undecided: false, basis: `keywords in the code ${path.entry} runs${chosen}` };
  }
  // Each alternative is read with the whole path's code: past a bound, a program of thousands of undecided branches
  // (the agent's own code) would stall the report. So many open branches leave the route unknown anyway.
  const alternatives = path.open.reduce((count, choice) => count + choice.alternatives.length, 0);
  if (alternatives > maxOpenAlternatives) {
    return {
      route: 'unknown',
      undecided: true,
      basis: `${path.entry} has ${alternatives} branches the command does not decide (more than ${maxOpenAlternatives} are not read)`,
    };
  }
  // A branch that only stops the program (an unknown mode's error) trains nothing.
  const stops = (code: string) => /^\s*(raise\b|sys\.exit\(|exit\()/m.test(code);
  const routes = new Set(
    path.open.flatMap((choice) =>
      choice.alternatives
        .map((alternative) => detectRoute(`${base}\n${alternative}`, among))
        .filter((route, i) => route !== 'unknown' || !stops(choice.alternatives[i]!)),
    ),
  );
  if (routes.size === 1) {
    return {
      route: [...routes][0]!,
      undecided: false,
      basis: `keywords in the code ${path.entry} runs${chosen} (every open branch agrees)`,
    };
  }
  return {
    route: 'unknown',
    undecided: true,
    basis: `${path.entry} runs ${[...routes].join(' or ')} depending on ${path.open.map((c) => c.test).join('; ')}, which the command does not fix`,
  };
}

/**
 * The route a job's code names, among the given routes: the Python programs of the code snapshot its command starts, each
 * read along the path its arguments select. Without a snapshot, the command's own words.
 */
export function readRoute(command: string, files: Record<string, string> | undefined, among: readonly Route[] = allRoutes): RouteReading {
  if (!files || Object.keys(files).length === 0) {
    return { route: detectRoute(command, among), basis: 'keywords in the command (no code snapshot)', undecided: false };
  }
  const invocations = invocationsOf(command, files);
  if (invocations.length === 0) {
    const named = new Set(
      Object.values(files)
        .map((text) => detectRoute(text, among))
        .filter((route) => route !== 'unknown'),
    );
    if (named.size > 1) {
      return {
        route: 'unknown',
        undecided: true,
        basis: `the command starts no file of the code snapshot by name, and its files follow different routes (${[...named].join(', ')})`,
      };
    }
    const route = [...named][0] ?? detectRoute(command, among);
    return {
      route,
      basis: 'keywords in the code snapshot and the command (the command starts none of its files by name)',
      undecided: false,
    };
  }
  const readings = invocations.map((invocation) => routeOfPath(readCodePath(invocation, files), command, among));
  return combineRoutes(readings);
}

/** The code paths of the Python programs a command starts, each along the path its arguments select. */
function programPaths(command: string, files: Record<string, string> | undefined): CodePath[] {
  return files ? invocationsOf(command, files).map((invocation) => readCodePath(invocation, files)) : [];
}

/** The code a command's programs run, or the whole snapshot where it starts none of it by name; with the command. */
function codeText(command: string, files: Record<string, string> | undefined): string {
  const paths = programPaths(command, files);
  const texts = paths.length > 0 ? paths.map((path) => `${path.docstring}\n${path.text}`) : Object.values(files ?? {});
  return `${command}\n${texts.join('\n')}`.toLowerCase();
}

/** Several programs or jobs behind one model: an undecided one leaves the route unknown; else the most specific route. */
export function combineRoutes(readings: RouteReading[]): RouteReading {
  const basis = [...new Set(readings.map((r) => r.basis))].join('; ');
  const undecided = readings.some((r) => r.undecided);
  if (undecided || readings.length === 0) return { route: 'unknown', basis: basis || 'no training job', undecided };
  const route = readings.map((r) => r.route).sort((a, b) => priority(a) - priority(b))[0]!;
  return { route, basis, undecided: false };
}

/**
 * trl's trainers whose training is itself a route, by class name as the job trace records it (trl's and
 * `trl.experimental`'s, trl 1.13); the others (SFTTrainer, transformers' Trainer) fit given data, read as the trace says.
 * test/route.test.ts checks that every trainer of the installed `trl.experimental` is here, or trains no policy.
 */
export const trainerRoutes: Record<string, Route> = {
  GRPOTrainer: 'grpo',
  // GRPO's variants and subclasses: group-relative policy gradients on the policy's own rewarded samples.
  AsyncGRPOTrainer: 'grpo',
  GMPOTrainer: 'grpo',
  GRPOWithReplayBufferTrainer: 'grpo',
  MiniLLMTrainer: 'grpo',
  SDPOTrainer: 'grpo',
  PPOTrainer: 'ppo',
  PPOv2Trainer: 'ppo',
  RLOOTrainer: 'reinforce',
  // A*-PO: one sample a prompt, its reward less an estimated optimal value as the advantage.
  A2POTrainer: 'reinforce',
  DPOTrainer: 'dpo',
  OnlineDPOTrainer: 'dpo',
  IPOTrainer: 'dpo',
  KTOTrainer: 'dpo',
  ORPOTrainer: 'dpo',
  CPOTrainer: 'dpo',
  BCOTrainer: 'dpo',
  TPOTrainer: 'dpo',
  NashMDTrainer: 'dpo',
  XPOTrainer: 'dpo',
  // Distillation: the student fits a teacher's (or its own) token distributions; no reward chooses or weights the data.
  DistillationTrainer: 'sft',
  AsyncDistillationTrainer: 'sft',
  ServerDistillationTrainer: 'sft',
  GKDTrainer: 'sft',
  GOLDTrainer: 'sft',
  IWOPDTrainer: 'sft',
  SDFTTrainer: 'sft',
  SSDTrainer: 'sft',
};

/** Updates a loop over the policy's own samples can make; without words for one, it fine-tunes on the rewarded ones. */
const onlineUpdates: Route[] = ['ppo', 'grpo', 'dpo', 'reinforce'];
/** Policy-gradient updates: their words stand where the trace saw no sampling (vLLM, sglang or a sampler of the job's own is not traced). */
const policyGradients: Route[] = ['ppo', 'grpo', 'reinforce'];
/** What words can tell of a loop over given data: a preference loss, or a reward choosing the data. */
const offlineUpdates: Route[] = ['dpo', 'expert_iteration', 'reward_filtered_sft'];

/**
 * The route of a job from its trace (what ran), with its code's words only for what the trace cannot tell; undefined
 * where the job's Python left no trace (then the code's words alone decide: `readRoute`).
 * `rolloutFiles`: the workspace paths launch_rollouts wrote its batches to.
 */
export function routeFromTrace(
  trace: JobTrace | undefined,
  rolloutFiles: ReadonlySet<string>,
  /** The job's command, read where its trace names no program. */
  command: string,
  files: Record<string, string> | undefined,
): RouteReading | undefined {
  if (!trace?.python) return undefined;
  // The code read for words is what the job's Python processes started, not what its shell line seems to start.
  const quote = (arg: string) => (/^[\w./=:,@+-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`);
  const ran = trace.programs.map((argv) => argv.map(quote).join(' ')).join(' && ') || command;
  const trainer = trace.trainers.trained.find((name) => trainerRoutes[name]);
  if (trainer) return { route: trainerRoutes[trainer]!, basis: `trl's ${trainer} trained (job trace)`, undecided: false };
  if (trace.gradients === 0) return { route: 'unknown', basis: 'its Python ran no gradient step (job trace)', undecided: false };
  const how = trace.trainers.trained.length > 0 ? `${trace.trainers.trained.join(', ')} trained` : 'gradient steps ran';
  const rollouts = trace.reads.filter((path) => rolloutFiles.has(path) || path.startsWith('rollouts/'));
  // A sampled generation between gradient steps is also how an SFT run shows its progress: it trains on its samples
  // only where its code names a reward for them.
  if (rollouts.length > 0 || (trace.online && /reward/.test(codeText(ran, files)))) {
    const source =
      rollouts.length > 0
        ? `on launch_rollouts' batches (${rollouts.slice(0, 3).join(', ')}${rollouts.length > 3 ? ', …' : ''})`
        : 'on samples it drew between gradient steps';
    const words = readRoute(ran, files, onlineUpdates);
    if (words.undecided) return { ...words, basis: `${how} ${source} (job trace); ${words.basis}` };
    const route = words.route === 'unknown' ? 'expert_iteration' : words.route;
    const named = words.route === 'unknown' ? 'no policy-gradient or preference words in its code' : words.basis;
    return { route, basis: `${how} ${source} (job trace); ${named}`, undecided: false };
  }
  // A hand-written loop may sample through what the hook does not trace: where its code names a policy-gradient update
  // without a branch choosing it, that stands. A branch is chosen by the traced command line alone, not by the
  // environment it ran in (`MODE=sft` before it): a script with another mode is read below, as given data.
  if (trace.trainers.trained.length === 0 && programPaths(ran, files).every((path) => path.chosen.length === 0)) {
    const updates = readRoute(ran, files, policyGradients);
    if (!updates.undecided && policyGradients.includes(updates.route)) {
      const basis = `${how}, but no sampling or rollout batch read was traced (job trace); ${updates.basis}: taken as sampling the hook does not see (sglang, a sampler of its own)`;
      return { route: updates.route, basis, undecided: false };
    }
  }
  const words = readRoute(ran, files, offlineUpdates);
  if (words.undecided) return { ...words, basis: `${how} on given data (job trace); ${words.basis}` };
  // Data the policy did not sample, chosen by a reward: reward-filtered, however the code names it.
  const route = words.route === 'dpo' ? 'dpo' : words.route === 'unknown' ? 'sft' : 'reward_filtered_sft';
  const named = words.route === 'unknown' ? 'no reward filter or preference loss in its code' : words.basis;
  return { route, basis: `${how} on given data, not the policy's samples (job trace); ${named}`, undecided: false };
}
