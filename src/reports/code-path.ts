/**
 * A simple static reading of the code a job's command runs: which Python files it starts,
 * with which arguments and environment, and which of their code those arguments select.
 * It reads argparse and click options, `os.environ`/`os.getenv` reads and string constants
 * (the selectors), prunes the `if`/`elif`/`else` and `match` branches that test them, and
 * keeps only the functions and classes the selected path refers to. What it cannot read (a
 * selector the command sets from a shell variable, a positional mode, a dict of handlers)
 * it leaves open: a branch it cannot decide stays an alternative, never a guess.
 */

/** One Python program a command starts. */
export interface Invocation {
  /** Path of the entry file inside the code snapshot. */
  entry: string;
  args: string[];
  env: Record<string, string>;
}

/** The code one invocation runs. */
export interface CodePath {
  entry: string;
  /** The code every way through it runs (selected branches and what they reach); the whole entry file when nothing is selected. */
  text: string;
  /** The entry file's docstring, which may describe every path through it. */
  docstring: string;
  /** Branches that test a selector whose value the command does not tell: each alternative's code. */
  open: Array<{ test: string; alternatives: string[] }>;
  /** The branches chosen by the command, as `condition` texts, for the report's evidence. */
  chosen: string[];
  /** Selectors that offer choices; their values in this invocation (undefined: unknown). */
  selectors: Array<{ name: string; value: Value; choices: string[] }>;
  /** Whether any branch tests a selector (then the reading is of the selected path, not the whole file). */
  dispatches: boolean;
}

type Value = string | boolean | null | undefined;

// ---------------------------------------------------------------------------
// The command line: which Python programs it starts.

const pythonProgram = /^(?:.*\/)?python(?:3(?:\.\d+)?)?$/;
const pythonLaunchers = new Set(['accelerate', 'torchrun', 'deepspeed']);
const shells = new Set(['sh', 'bash']);
const wrappers = new Set(['env', 'nohup', 'time', 'timeout', 'exec', 'stdbuf', 'nice']);

/** Splits a shell command into simple commands of words; quotes are honoured, expansions kept as text. */
export function shellCommands(command: string): string[][] {
  const commands: string[][] = [[]];
  let word: string | null = null;
  const end = () => {
    if (word !== null) commands.at(-1)!.push(word);
    word = null;
  };
  for (let i = 0; i < command.length; i++) {
    const c = command[i]!;
    if (c === "'" || c === '"') {
      const close = command.indexOf(c, i + 1);
      word = (word ?? '') + command.slice(i + 1, close === -1 ? undefined : close);
      i = close === -1 ? command.length : close;
    } else if (c === '\\' && i + 1 < command.length) {
      if (command[i + 1] !== '\n') word = (word ?? '') + command[i + 1];
      i++;
    } else if (c === '#' && word === null) {
      const newline = command.indexOf('\n', i);
      i = newline === -1 ? command.length : newline - 1;
    } else if (/\s/.test(c) && c !== '\n') end();
    else if (c === ';' || c === '&' || c === '|' || c === '\n' || c === '(' || c === ')') {
      end();
      if (commands.at(-1)!.length > 0) commands.push([]);
    } else word = (word ?? '') + c;
  }
  end();
  return commands.filter((words) => words.length > 0);
}

/** Finds the snapshot file a path or module names (relative to the workspace, code/ or the current folder). */
function resolveFile(files: Record<string, string>, path: string): string | undefined {
  const clean = path.replace(/^\/workspace\//, '').replace(/^(\.\/)+/, '');
  const candidates = [clean, clean.replace(/^code\//, '')];
  for (const candidate of candidates) if (candidate in files) return candidate;
  return Object.keys(files)
    .filter((file) => clean.endsWith(`/${file}`))
    .sort((a, b) => b.length - a.length)[0];
}

function resolveModule(files: Record<string, string>, module: string): string | undefined {
  const path = module.replace(/^code\./, '').replace(/\./g, '/');
  return resolveFile(files, `${path}.py`) ?? resolveFile(files, `${path}/__main__.py`) ?? resolveFile(files, `${path}/__init__.py`);
}

/** The Python programs in the snapshot that a command starts, following shell scripts of the snapshot one level down. */
export function invocationsOf(command: string, files: Record<string, string>, depth = 0): Invocation[] {
  const found: Invocation[] = [];
  const exported: Record<string, string> = {};
  for (let words of shellCommands(command)) {
    if (words[0] === 'export') {
      for (const word of words.slice(1)) {
        const m = /^(\w+)=(.*)$/.exec(word);
        if (m) exported[m[1]!] = m[2]!;
      }
      continue;
    }
    const env = { ...exported };
    for (;;) {
      const assignment = /^(\w+)=(.*)$/.exec(words[0] ?? '');
      if (assignment) env[assignment[1]!] = assignment[2]!;
      else if (!wrappers.has(words[0] ?? '')) break;
      words = words.slice(1);
      // A wrapper's own options and values (nice -n 5, timeout -s KILL 600) precede the program.
      while (words[0] !== undefined && /^(-.*|\d+(\.\d+)?[smhd]?|[A-Z]+)$/.test(words[0])) words = words.slice(1);
    }
    const [program, ...rest] = words;
    if (program === undefined) continue;
    if (!pythonProgram.test(program) && !pythonLaunchers.has(program) && !(program === 'uv' && rest[0] === 'run')) {
      const script = shells.has(program) ? rest.find((word) => !word.startsWith('-')) : program;
      const file = script?.endsWith('.sh') ? resolveFile(files, script) : undefined;
      if (file && depth < 2) found.push(...invocationsOf(files[file]!, files, depth + 1).map((i) => ({ ...i, env: { ...env, ...i.env } })));
      continue;
    }
    // The interpreter's or launcher's own options come before the script (or -m module, or -c code).
    const start = rest.findIndex((word) => word.endsWith('.py') || word === '-m' || word === '-c');
    const tail = start === -1 ? [] : rest.slice(start);
    if (tail[0] === '-c' || tail.length === 0) continue;
    const entry = tail[0] === '-m' ? resolveModule(files, tail[1] ?? '') : resolveFile(files, tail[0] ?? '');
    if (entry) found.push({ entry, args: tail.slice(tail[0] === '-m' ? 2 : 1), env });
  }
  return found;
}

// ---------------------------------------------------------------------------
// Python source: logical lines and blocks.

interface Line {
  /** The statement with the comments that precede it. */
  text: string;
  /** The statement alone, without comments. */
  code: string;
  indent: number;
}

interface Node {
  line: Line;
  body: Node[];
}

/** Logical lines: brackets, backslashes and triple-quoted strings join physical lines; comment lines go with the next statement. */
function logicalLines(source: string): Line[] {
  const lines: Line[] = [];
  const physical = source.replace(/\r\n?/g, '\n').split('\n');
  let pendingComments: string[] = [];
  let current: { text: string[]; code: string[]; indent: number } | null = null;
  let depth = 0;
  let triple: string | null = null;
  for (const raw of physical) {
    if (!current) {
      const trimmed = raw.trim();
      if (trimmed === '' || trimmed.startsWith('#')) {
        if (trimmed) pendingComments.push(trimmed);
        continue;
      }
      current = { text: [...pendingComments], code: [], indent: raw.length - raw.trimStart().length };
      pendingComments = [];
    }
    current.text.push(raw);
    // The statement ends where a comment starts; strings and brackets are followed to find that place.
    let end = raw.length;
    for (let i = 0; i < raw.length; i++) {
      const c = raw[i]!;
      if (triple) {
        const close = raw.indexOf(triple, i);
        if (close === -1) break;
        i = close + 2;
        triple = null;
      } else if (raw.startsWith('"""', i) || raw.startsWith("'''", i)) {
        triple = raw.slice(i, i + 3);
        i += 2;
      } else if (c === '"' || c === "'") {
        while (++i < raw.length && raw[i] !== c) if (raw[i] === '\\') i++;
      } else if (c === '#') {
        end = i;
        break;
      } else if (c === '(' || c === '[' || c === '{') depth++;
      else if (c === ')' || c === ']' || c === '}') depth = Math.max(0, depth - 1);
    }
    let code = raw.slice(0, end).trim();
    const continued = !triple && code.endsWith('\\');
    if (continued) code = code.slice(0, -1);
    current.code.push(code.trim());
    if (!triple && depth === 0 && !continued) {
      lines.push({ text: current.text.join('\n'), code: current.code.join(' ').trim(), indent: current.indent });
      current = null;
    }
  }
  if (current) lines.push({ text: current.text.join('\n'), code: current.code.join(' ').trim(), indent: current.indent });
  return lines;
}

function blocks(lines: Line[]): Node[] {
  let i = 0;
  const parse = (indent: number): Node[] => {
    const nodes: Node[] = [];
    while (i < lines.length && lines[i]!.indent > indent) {
      const node: Node = { line: lines[i++]!, body: [] };
      if (node.line.code.endsWith(':')) node.body = parse(node.line.indent);
      nodes.push(node);
    }
    return nodes;
  };
  return parse(-1);
}

// ---------------------------------------------------------------------------
// Selectors: what can choose a path, and the value this invocation gives it.

interface Selector {
  value: Value;
  choices: string[];
  /** The statement that defines it: left out of the reading (its help and choices name every path). */
  definition: string;
}

const literal = (raw: string | undefined): Value => {
  if (raw === undefined) return undefined;
  const text = raw.trim();
  const quoted = /^[rbuf]?(['"])(.*)\1$/s.exec(text);
  if (quoted) return quoted[2]!;
  if (text === 'True') return true;
  if (text === 'False') return false;
  if (text === 'None') return null;
  if (/^-?\d+(\.\d+)?$/.test(text)) return text;
  return undefined;
};

const keyword = (call: string, name: string) =>
  new RegExp(`\\b${name}\\s*=\\s*([rbuf]?'[^']*'|[rbuf]?"[^"]*"|\\w[\\w.-]*)`).exec(call)?.[1];
const stringsIn = (text: string) => [...text.matchAll(/['"]([^'"]+)['"]/g)].map((m) => m[1]!);

/** The value of `--name` in a command's arguments: the word after it, or after `=`; `true` for a bare flag. */
function optionValue(args: string[], flags: string[]): { given: boolean; value: string | undefined } {
  for (let i = args.length - 1; i >= 0; i--) {
    for (const flag of flags) {
      if (args[i] === flag) return { given: true, value: args[i + 1] };
      if (args[i]!.startsWith(`${flag}=`)) return { given: true, value: args[i]!.slice(flag.length + 1) };
    }
  }
  return { given: false, value: undefined };
}

/** A command word the shell would expand is not known statically. */
const known = (word: string | undefined): Value => (word === undefined || /[$`*?]/.test(word) ? undefined : word);

function selectorsOf(lines: Line[], invocation: Invocation): Map<string, Selector> {
  const selectors = new Map<string, Selector>();
  for (const line of lines) {
    const code = line.code;
    const option = /(?:add_argument|click\.option|click\.argument)\s*\(([^]*)\)/.exec(code);
    if (option) {
      const call = option[1]!;
      const flags = stringsIn(call.split(/\b\w+\s*=/)[0] ?? '').filter((s) => s.startsWith('-'));
      const long = flags.find((f) => f.startsWith('--')) ?? flags[0];
      const positional = /^\s*['"](\w+)['"]/.exec(call)?.[1];
      const dest = literal(keyword(call, 'dest'));
      const name = typeof dest === 'string' ? dest : (long ?? positional)?.replace(/^-+/, '').replace(/-/g, '_');
      if (!name) continue;
      const action = literal(keyword(call, 'action'));
      const isFlag = /is_flag\s*=\s*True/.test(call) || action === 'store_true' || action === 'store_false';
      const choices = stringsIn(/choices\s*=\s*([[(][^\])]*[\])])|Choice\(\s*([[(][^\])]*[\])])/.exec(call)?.slice(1).join('') ?? '');
      const { given, value } = optionValue(invocation.args, flags);
      let selected: Value;
      // A positional argument's value is not read: that would need every option's arity.
      if (!long) selected = undefined;
      else if (isFlag) selected = action === 'store_false' ? !given : given;
      else if (given) selected = known(value);
      else if (/required\s*=\s*True/.test(call)) selected = undefined;
      else selected = keyword(call, 'default') === undefined ? null : literal(keyword(call, 'default'));
      selectors.set(name, { value: selected, choices, definition: line.text });
      continue;
    }
    const environment = /^([A-Za-z_]\w*)\s*=\s*os\.(?:environ\.get|getenv)\(\s*['"](\w+)['"]\s*(?:,\s*([^)]*))?\)$/.exec(code);
    const environmentItem = /^([A-Za-z_]\w*)\s*=\s*os\.environ\[\s*['"](\w+)['"]\s*\]$/.exec(code);
    if (environment || environmentItem) {
      const [, name, variable, fallback] = (environment ?? environmentItem)!;
      const value = Object.hasOwn(invocation.env, variable!)
        ? known(invocation.env[variable!])
        : environment
          ? fallback
            ? literal(fallback)
            : null
          : undefined;
      selectors.set(name!, { value, choices: [], definition: line.text });
      continue;
    }
    const constant = line.indent === 0 ? /^([A-Za-z_]\w*)\s*=\s*([rbu]?(['"])[^'"]*\3|True|False)$/.exec(code) : null;
    if (constant) selectors.set(constant[1]!, { value: literal(constant[2]), choices: [], definition: line.text });
  }
  return selectors;
}

// ---------------------------------------------------------------------------
// Conditions on selectors.

interface Test {
  /** Whether the condition reads a selector at all. */
  dispatch: boolean;
  /** Its value for this invocation; undefined when it cannot be known. */
  value: boolean | undefined;
}

const truthy = (v: Value) => (v === undefined ? undefined : v !== null && v !== false && v !== '' && v !== '0');

/** The selector an expression such as `args.mode`, `self.cfg.mode` or `mode` reads, if any. */
function selectorIn(expression: string, selectors: Map<string, Selector>): Selector | undefined {
  const m = /^(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*)$/.exec(expression.trim());
  return m ? selectors.get(m[1]!) : undefined;
}

function evaluate(condition: string, selectors: Map<string, Selector>): Test {
  let text = condition.trim();
  while (/^\((.*)\)$/.test(text) && balanced(text.slice(1, -1))) text = text.slice(1, -1).trim();
  for (const operator of [' or ', ' and ']) {
    const parts = splitTopLevel(text, operator);
    if (parts.length > 1) {
      const tests = parts.map((part) => evaluate(part, selectors));
      const values = tests.map((t) => t.value);
      const value =
        operator === ' or '
          ? values.includes(true)
            ? true
            : values.every((v) => v === false)
              ? false
              : undefined
          : values.includes(false)
            ? false
            : values.every((v) => v === true)
              ? true
              : undefined;
      return { dispatch: tests.some((t) => t.dispatch), value };
    }
  }
  const negated = /^not\s+(.*)$/.exec(text);
  if (negated) {
    const inner = evaluate(negated[1]!, selectors);
    return { dispatch: inner.dispatch, value: inner.value === undefined ? undefined : !inner.value };
  }
  const compare = /^(.+?)\s*(==|!=)\s*(.+)$/.exec(text);
  if (compare) {
    const [left, right] = [compare[1]!, compare[3]!];
    const selector = selectorIn(left, selectors) ?? selectorIn(right, selectors);
    const constant = selectorIn(left, selectors) ? literal(right) : literal(left);
    if (!selector || (constant === undefined && !/^None$/.test(right.trim()))) return { dispatch: false, value: undefined };
    if (selector.value === undefined) return { dispatch: true, value: undefined };
    const equal = String(selector.value) === String(constant);
    return { dispatch: true, value: compare[2] === '==' ? equal : !equal };
  }
  const membership = /^(.+?)\s+(not\s+in|in)\s+[([{](.*)[)\]}]$/.exec(text);
  if (membership) {
    const selector = selectorIn(membership[1]!, selectors);
    if (!selector) return { dispatch: false, value: undefined };
    if (selector.value === undefined) return { dispatch: true, value: undefined };
    const inside = stringsIn(membership[3]!).includes(String(selector.value));
    return { dispatch: true, value: membership[2] === 'in' ? inside : !inside };
  }
  const selector = selectorIn(text, selectors);
  return selector ? { dispatch: true, value: truthy(selector.value) } : { dispatch: false, value: undefined };
}

function balanced(text: string): boolean {
  let depth = 0;
  for (const c of text) {
    if ('([{'.includes(c)) depth++;
    else if (')]}'.includes(c) && --depth < 0) return false;
  }
  return depth === 0;
}

function splitTopLevel(text: string, separator: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    if ('([{'.includes(text[i]!)) depth++;
    else if (')]}'.includes(text[i]!)) depth--;
    else if (depth === 0 && text.startsWith(separator, i)) {
      parts.push(text.slice(start, i));
      start = i + separator.length;
    }
  }
  parts.push(text.slice(start));
  return parts;
}

/** The value a `case` pattern matches for a selector's value (`_` matches anything). */
function caseMatches(pattern: string, value: Value): boolean | undefined {
  const alternatives = splitTopLevel(pattern.replace(/\s+if\s+.*$/, ''), '|').map((p) => p.trim());
  if (alternatives.includes('_')) return true;
  if (value === undefined) return undefined;
  if (alternatives.some((p) => literal(p) === undefined)) return undefined;
  return alternatives.some((p) => String(literal(p)) === String(value));
}

// ---------------------------------------------------------------------------
// Pruning and reachability.

interface Segment {
  text: string[];
  open: Array<{ test: string; alternatives: Segment[] }>;
}

interface Reading {
  selectors: Map<string, Selector>;
  /** Functions and classes by name (a name defined twice keeps both). */
  definitions: Map<string, Segment[]>;
  chosen: string[];
  dispatches: boolean;
  /** Statements left out of every reading: selector definitions. */
  hidden: Set<string>;
}

const commentsOf = (text: string) => text.split('\n').filter((line) => line.trim().startsWith('#'));
const headerOf = (code: string) => /^(?:async\s+)?(def|class)\s+([A-Za-z_]\w*)/.exec(code);
const branchOf = (code: string) =>
  /^(if|elif)\s+(.*?):\s*(.*)$/s.exec(code) ??
  (/^else\s*:\s*(.*)$/s.exec(code) ? ['', 'else', '', /^else\s*:\s*(.*)$/s.exec(code)![1]!] : null);

/** Appends the code of `nodes` that runs to `segment` (written in place: a big file is not copied level by level). */
function prune(nodes: Node[], reading: Reading, inClass: boolean, segment: Segment = { text: [], open: [] }): Segment {
  for (let i = 0; i < nodes.length; i++) {
    const node = nodes[i]!;
    const code = node.line.code;
    // Imports name what a module may use, not what runs; selector definitions name every path.
    if (reading.hidden.has(node.line.text) || /^(from\s+\S+\s+)?import\s/.test(code)) continue;
    const header = headerOf(code);
    if (header) {
      // A class keeps its own statements and special methods; its other methods are reached by name.
      const inline = inClass && header[1] === 'def' && /^__\w+__$/.test(header[2]!);
      const own = inline ? segment : { text: [], open: [] };
      own.text.push(node.line.text);
      prune(node.body, reading, header[1] === 'class', own);
      if (!inline) reading.definitions.set(header[2]!, [...(reading.definitions.get(header[2]!) ?? []), own]);
      continue;
    }
    const branch = /^if\s/.test(code) ? branchOf(code) : null;
    if (branch) {
      // An if/elif/else chain: its branches, in order.
      const chain: Array<{ condition: string | null; node: Node; inline: string }> = [{ condition: branch[2]!, node, inline: branch[3]! }];
      while (i + 1 < nodes.length && /^(elif\s|else\s*:)/.test(nodes[i + 1]!.line.code)) {
        const next = branchOf(nodes[++i]!.line.code)!;
        chain.push({ condition: next[1] === 'else' ? null : next[2]!, node: nodes[i]!, inline: next[3]! });
      }
      const possible: typeof chain = [];
      let dispatch = false;
      for (const arm of chain) {
        const test =
          arm.condition === null ? { dispatch: false, value: true as boolean | undefined } : evaluate(arm.condition, reading.selectors);
        dispatch ||= test.dispatch;
        if (test.value === false) continue;
        possible.push(arm);
        if (test.value === true) break;
      }
      // A chosen branch keeps its comments and statements, not its condition (which names the other branches' values).
      const armSegment = (arm: (typeof chain)[number], into: Segment = { text: [], open: [] }) => {
        into.text.push(...commentsOf(arm.node.line.text), ...(arm.inline ? [arm.inline] : []));
        return prune(arm.node.body, reading, inClass, into);
      };
      if (!dispatch) {
        for (const arm of chain) {
          segment.text.push(arm.node.line.text);
          prune(arm.node.body, reading, inClass, segment);
        }
      } else {
        reading.dispatches = true;
        if (possible.length === 1) {
          reading.chosen.push(
            possible[0]!.condition ??
              `not (${chain
                .map((arm) => arm.condition)
                .filter(Boolean)
                .join(' or ')})`,
          );
          armSegment(possible[0]!, segment);
        } else if (possible.length > 1) {
          segment.open.push({ test: chain[0]!.condition!, alternatives: possible.map((arm) => armSegment(arm)) });
        }
      }
      continue;
    }
    const match = /^match\s+(.*):$/.exec(code);
    const subject = match ? selectorIn(match[1]!, reading.selectors) : undefined;
    if (match && subject) {
      reading.dispatches = true;
      const possible: Node[] = [];
      for (const arm of node.body) {
        const pattern = /^case\s+(.*):$/.exec(arm.line.code)?.[1];
        const test = pattern === undefined ? false : caseMatches(pattern, subject.value);
        if (test === false) continue;
        possible.push(arm);
        if (test === true) break;
      }
      if (possible.length === 1) {
        reading.chosen.push(`${match[1]} matches ${/^case\s+(.*):$/.exec(possible[0]!.line.code)![1]}`);
        prune(possible[0]!.body, reading, inClass, segment);
      } else if (possible.length > 1) {
        segment.open.push({ test: `match ${match[1]}`, alternatives: possible.map((arm) => prune(arm.body, reading, inClass)) });
      }
      continue;
    }
    segment.text.push(node.line.text);
    prune(node.body, reading, inClass, segment);
  }
  return segment;
}

const identifiers = (text: string) => new Set(text.match(/[A-Za-z_]\w*/g) ?? []);

/** The text of a segment and of every definition it refers to, transitively; open branches are read separately. */
function reach(start: Segment, definitions: Map<string, Segment[]>, seen = new Set<string>()): Segment {
  const out: Segment = { text: [...start.text], open: [...start.open] };
  const queue = [...start.text];
  while (queue.length > 0) {
    for (const name of identifiers(queue.pop()!)) {
      if (seen.has(name) || !definitions.has(name)) continue;
      seen.add(name);
      for (const definition of definitions.get(name)!) {
        for (const text of definition.text) {
          out.text.push(text);
          queue.push(text);
        }
        for (const choice of definition.open) out.open.push(choice);
      }
    }
  }
  return out;
}

/** Local modules an entry file imports, as snapshot paths. */
function importsOf(source: string, from: string, files: Record<string, string>): string[] {
  const names = [
    ...[...source.matchAll(/^\s*from\s+(\.*[\w.]*)\s+import\b/gm)].map((m) => m[1]!),
    ...[...source.matchAll(/^\s*import\s+([\w., ]+)/gm)].flatMap((m) => m[1]!.split(',').map((n) => n.trim().split(/\s+/)[0]!)),
  ];
  const folder = from.includes('/') ? from.slice(0, from.lastIndexOf('/') + 1) : '';
  return names
    .map((name) => {
      const relative = /^\.+/.exec(name)?.[0].length ?? 0;
      const module = name.slice(relative);
      return (relative ? resolveFile(files, `${folder}${module.replace(/\./g, '/')}.py`) : undefined) ?? resolveModule(files, module);
    })
    .filter((path): path is string => path !== undefined);
}

/** Reads the code an invocation runs: its entry file and the local modules it imports (transitively). */
export function readCodePath(invocation: Invocation, files: Record<string, string>): CodePath {
  const modules = [invocation.entry];
  for (let i = 0; i < modules.length; i++) {
    for (const imported of importsOf(files[modules[i]!]!, modules[i]!, files)) if (!modules.includes(imported)) modules.push(imported);
  }
  const parsed = modules.map((path) => ({ path, lines: logicalLines(files[path]!) }));
  const selectors = new Map<string, Selector>();
  for (const { lines } of parsed.slice().reverse())
    for (const [name, selector] of selectorsOf(lines, invocation)) selectors.set(name, selector);
  const reading: Reading = {
    selectors,
    definitions: new Map(),
    chosen: [],
    dispatches: false,
    hidden: new Set([...selectors.values()].map((s) => s.definition)),
  };
  const tops = parsed.map(({ lines }, index) => {
    const nodes = blocks(lines);
    // A module's docstring describes every path through it; an imported module runs only its top level.
    const body = /^[rbu]?("""|''')/.test(nodes[0]?.line.code ?? '') ? nodes.slice(1) : nodes;
    return { segment: prune(body, reading, false), docstring: body === nodes || index > 0 ? '' : nodes[0]!.line.text };
  });
  const start: Segment = { text: [], open: [] };
  for (const top of tops) {
    for (const text of top.segment.text) start.text.push(text);
    for (const choice of top.segment.open) start.open.push(choice);
  }
  const reached = reach(start, reading.definitions);
  const seen = new Set<string>();
  for (const text of reached.text) for (const name of identifiers(text)) if (reading.definitions.has(name)) seen.add(name);
  const open = reached.open.map((choice) => ({
    test: choice.test,
    alternatives: choice.alternatives.map((alternative) => reach(alternative, reading.definitions, new Set(seen)).text.join('\n')),
  }));
  let text = reached.text.join('\n');
  if (!reading.dispatches) {
    // Nothing chose a path: every function of the entry file counts, as it always did.
    text = files[invocation.entry]!;
  }
  return {
    entry: invocation.entry,
    text,
    docstring: tops[0]!.docstring,
    open,
    chosen: reading.chosen,
    selectors: [...selectors.entries()]
      .filter(([, s]) => s.choices.length > 0)
      .map(([name, s]) => ({ name, value: s.value, choices: s.choices })),
    dispatches: reading.dispatches,
  };
}
