import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../src/util/paths.js';

/** The lines of a Markdown text, those inside fenced code blocks blanked: code holds no links or headings. */
function outsideFences(markdown: string): string[] {
  let fence: string | undefined;
  return markdown.split('\n').map((line) => {
    const marker = /^\s{0,3}(`{3,}|~{3,})(.*)$/.exec(line);
    if (fence === undefined) {
      if (!marker) return line;
      fence = marker[1];
      return '';
    }
    if (marker && marker[1]!.startsWith(fence) && marker[2]!.trim() === '') fence = undefined;
    return '';
  });
}

/** Markdown without code blocks, code spans or HTML comments. */
function proseOf(markdown: string): string {
  return outsideFences(markdown)
    .join('\n')
    .replace(/<!--[\s\S]*?-->/g, ' ')
    .replace(/(`+)[\s\S]*?\1/g, (span) => ' '.repeat(span.length));
}

/** The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor a Markdown text offers: its headings (repeats get -1, -2, ...) and explicit `<a id>` / `<a name>`. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of outsideFences(markdown)) {
    const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading !== undefined) {
      const base = slug(heading);
      const count = seen.get(base) ?? 0;
      seen.set(base, count + 1);
      anchors.add(count === 0 ? base : `${base}-${count}`);
    }
    for (const match of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(match[1]!);
  }
  return anchors;
}

/**
 * The broken relative links of a Markdown text that lives at `file` (an absolute path): a
 * target file that does not exist, or an `#anchor` that names no heading of its target.
 * Links to other sites (`https:`, `mailto:`) are not checked; links in code are not links.
 */
function brokenLinks(markdown: string, file: string): string[] {
  const prose = proseOf(markdown);
  const targets = [
    ...[...prose.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!),
    ...[...prose.matchAll(/^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)].map((m) => m[1]!),
  ];
  const broken: string[] = [];
  for (const target of targets) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
    const [pathPart, anchor] = target.split('#', 2) as [string, string | undefined];
    const path = pathPart === '' ? file : resolve(dirname(file), decodeURIComponent(pathPart));
    if (path !== file && !existsSync(path)) {
      broken.push(`${target}: no file ${relative(packageRoot, path)}`);
      continue;
    }
    if (anchor === undefined || anchor === '') continue;
    if (path !== file && (statSync(path).isDirectory() || !path.endsWith('.md'))) {
      broken.push(`${target}: an anchor into ${relative(packageRoot, path)}, which has no headings`);
      continue;
    }
    const text = path === file ? markdown : readFileSync(path, 'utf8');
    if (!anchorsOf(text).has(decodeURIComponent(anchor).toLowerCase())) {
      broken.push(`${target}: no heading #${anchor} in ${relative(packageRoot, path)}`);
    }
  }
  return broken;
}

const readme = join(packageRoot, 'README.md');
const docsDir = join(packageRoot, 'docs');
const docFiles = [
  readme,
  ...readdirSync(docsDir)
    .filter((name) => name.endsWith('.md'))
    .map((name) => join(docsDir, name)),
];

/** The block README.md must open with: the title, then the two commands every reader starts from. */
const opening = [
  '# a2rl-bench',
  '',
  '<!-- doc-commands: skip (minutes of work: the demo takes about 20 min, the test suite about 60 on 2 cores) -->', // test/doc-commands.test.ts
  '```sh',
  "npm run demo    # installs what it needs, then runs every task's main oracle end to end through the MCP server (about 20 min on 2 cores)",
  'npm test        # installs what it needs, then runs the test suite (unit, real sandbox, real MCP client, end to end)',
  '```',
  '',
].join('\n');

describe('docs', () => {
  it.each(docFiles.map((file) => relative(packageRoot, file)))('%s: every relative link and anchor resolves', (name) => {
    const file = join(packageRoot, name);
    expect(brokenLinks(readFileSync(file, 'utf8'), file)).toEqual([]);
  });

  it('README.md is at most 200 lines', () => {
    const text = readFileSync(readme, 'utf8');
    const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
    expect(lines).toBeLessThanOrEqual(200);
  });

  it('README.md opens with the two commands: npm run demo and npm test', () => {
    expect(readFileSync(readme, 'utf8').startsWith(opening)).toBe(true);
  });

  it('links to the three docs from README.md', () => {
    const text = readFileSync(readme, 'utf8');
    for (const doc of ['docs/ARCHITECTURE.md', 'docs/operating.md', 'docs/extending.md']) expect(text).toContain(`](${doc})`);
  });
});

describe('the link checker', () => {
  const file = join(packageRoot, 'docs', 'example.md');

  it('catches a missing file, a missing anchor in another file and in its own, and passes good links', () => {
    const text = [
      '# Example',
      '## Second part: `code`',
      '[good file](operating.md) [good anchor](ARCHITECTURE.md#layers) [own anchor](#second-part-code)',
      '[from the root](../README.md#tasks) [a site](https://example.com/nope.md)',
      '[reference]: extending.md',
      '[bad file](nope.md) [bad anchor](operating.md#no-such-heading) [bad own anchor](#nowhere)',
      '[anchor into a folder](../tasks#x)',
      '[bad reference]: ../missing/file.md',
    ].join('\n');
    expect(brokenLinks(text, file)).toEqual([
      'nope.md: no file docs/nope.md',
      'operating.md#no-such-heading: no heading #no-such-heading in docs/operating.md',
      '#nowhere: no heading #nowhere in docs/example.md',
      '../tasks#x: an anchor into tasks, which has no headings',
      '../missing/file.md: no file missing/file.md',
    ]);
  });

  it('ignores links inside code blocks, code spans and HTML comments', () => {
    const text = ['```md', '[in a block](nope.md)', '```', '`[in a span](nope.md)`', '<!-- [in a comment](nope.md) -->'].join('\n');
    expect(brokenLinks(text, file)).toEqual([]);
  });

  it('makes anchors as GitHub does, numbering repeated headings', () => {
    expect(slug('Benchmark an agent as it ships: `a2rl run`')).toBe('benchmark-an-agent-as-it-ships-a2rl-run');
    expect(slug('Invariants: where they are enforced and tested')).toBe('invariants-where-they-are-enforced-and-tested');
    expect([...anchorsOf('# A\n## B\n```sh\n# not a heading\n```\n## B\n<a id="custom"></a>')]).toEqual(['a', 'b', 'b-1', 'custom']);
  });
});
