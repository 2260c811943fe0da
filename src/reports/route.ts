import { type CodePath, invocationsOf, readCodePath } from './code-path.js';

/**
 * The training route a job took, read from its command and the code path that command
 * selects (code-path.ts), then named from the words and idioms of that code. Where the
 * command leaves the path open and the paths differ, the route is `unknown`, never a guess.
 */

/** expert_iteration: fine-tuning on the policy's own rewarded samples (rejection sampling, RFT), the simplest RL route. */
export type Route = 'sft' | 'expert_iteration' | 'grpo' | 'ppo' | 'reinforce' | 'copy_of_base' | 'unknown';

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
  ['expert_iteration', (t) => /expert[_ -]iteration|rejection[_ -]sampl|\brft\b|reward(ed)?[_ -](filter|complet|sampl)/.test(t)],
  ['sft', (t) => /\bsft\b|supervised|cross_entropy|fine-?tun|\bfit\(|teacher.forcing/.test(t)],
];

/** Every route a text names. */
export function routesNamed(source: string): Route[] {
  const text = source.toLowerCase();
  return routeSigns.filter(([, named]) => named(text)).map(([route]) => route);
}

/** The training route a piece of code follows, from the words and idioms it uses (the most specific one it names). */
export function detectRoute(source: string): Route {
  return routesNamed(source)[0] ?? 'unknown';
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
function routeOfPath(path: CodePath, command: string): RouteReading {
  if (!path.dispatches) {
    // A selector offering several routes, but no branch on it that can be read: which ran is not known.
    const offered = path.selectors.filter((s) => new Set(s.choices.map(detectRoute).filter((r) => r !== 'unknown')).size > 1);
    if (offered.length > 0) {
      return {
        route: 'unknown',
        undecided: true,
        basis: `${path.entry} offers ${describeSelectors(path)}, and how it dispatches on that is not read statically`,
      };
    }
    return { route: detectRoute(`${command}\n${path.text}`), undecided: false, basis: `keywords in ${path.entry} and its command` };
  }
  // The docstring counts unless it describes several routes (then it describes the script, not this run).
  const base = routesNamed(path.docstring).length > 1 ? path.text : `${path.docstring}\n${path.text}`;
  const chosen = path.chosen.length > 0 ? `, through ${path.chosen.join('; ')}` : '';
  if (path.open.length === 0) {
    return { route: detectRoute(base), undecided: false, basis: `keywords in the code ${path.entry} runs${chosen}` };
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
        .map((alternative) => detectRoute(`${base}\n${alternative}`))
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
 * The route of a job: the Python programs of the code snapshot its command starts, each
 * read along the path its arguments select. Without a snapshot, the command's own words.
 */
export function readRoute(command: string, files: Record<string, string> | undefined): RouteReading {
  if (!files || Object.keys(files).length === 0) {
    return { route: detectRoute(command), basis: 'keywords in the command (no code snapshot)', undecided: false };
  }
  const invocations = invocationsOf(command, files);
  if (invocations.length === 0) {
    const named = new Set(
      Object.values(files)
        .map(detectRoute)
        .filter((route) => route !== 'unknown'),
    );
    if (named.size > 1) {
      return {
        route: 'unknown',
        undecided: true,
        basis: `the command starts no file of the code snapshot by name, and its files follow different routes (${[...named].join(', ')})`,
      };
    }
    const route = [...named][0] ?? detectRoute(command);
    return {
      route,
      basis: 'keywords in the code snapshot and the command (the command starts none of its files by name)',
      undecided: false,
    };
  }
  const readings = invocations.map((invocation) => routeOfPath(readCodePath(invocation, files), command));
  return combineRoutes(readings);
}

/** Several programs or jobs behind one model: an undecided one leaves the route unknown; else the most specific route. */
export function combineRoutes(readings: RouteReading[]): RouteReading {
  const basis = [...new Set(readings.map((r) => r.basis))].join('; ');
  const undecided = readings.some((r) => r.undecided);
  if (undecided || readings.length === 0) return { route: 'unknown', basis: basis || 'no training job', undecided };
  const route = readings.map((r) => r.route).sort((a, b) => priority(a) - priority(b))[0]!;
  return { route, basis, undecided: false };
}
