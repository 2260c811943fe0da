import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../src/util/paths.js';

/** The layer table of docs/ARCHITECTURE.md, top first: each layer's path prefixes. */
function layers(): { name: string; paths: string[] }[] {
  const doc = readFileSync(join(packageRoot, 'docs', 'ARCHITECTURE.md'), 'utf8');
  const table = /<!-- layers:begin -->([\s\S]*?)<!-- layers:end -->/.exec(doc)?.[1] ?? '';
  return table
    .split('\n')
    .filter((line) => line.startsWith('| ') && !line.startsWith('| layer') && !line.startsWith('| ---'))
    .map((line) => {
      const [name, paths] = line
        .split('|')
        .slice(1, 3)
        .map((cell) => cell.trim());
      return { name: name!, paths: [...paths!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!) };
    });
}

function sourceFiles(dir: string): string[] {
  return readdirSync(join(packageRoot, dir), { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => relative(packageRoot, join(entry.parentPath, entry.name)));
}

/** Relative imports of every product file (static, type-only and dynamic), resolved to repository paths. */
function importGraph(files: string[]): Map<string, string[]> {
  return new Map(
    files.map((file) => {
      const { importedFiles } = ts.preProcessFile(readFileSync(join(packageRoot, file), 'utf8'), true, true);
      const targets = importedFiles
        .map((imported) => imported.fileName)
        .filter((name) => name.startsWith('.'))
        .map((name) => relative(packageRoot, resolve(packageRoot, dirname(file), name)).replace(/\.js$/, '.ts'));
      return [file, targets];
    }),
  );
}

/** Index of the layer a file belongs to (0 = top), by its longest matching path prefix. */
function layerOf(file: string, table: ReturnType<typeof layers>): number {
  let best = -1;
  let bestLength = 0;
  table.forEach((layer, index) =>
    layer.paths.forEach((prefix) => {
      if (file.startsWith(prefix) && prefix.length > bestLength) [best, bestLength] = [index, prefix.length];
    }),
  );
  return best;
}

/** File-level import circles, each as the path that closes it. */
function circles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (file: string): void => {
    state.set(file, 'open');
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === 'open') found.push([...stack.slice(stack.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of graph.keys()) if (!state.has(file)) visit(file);
  return found;
}

const table = layers();
const files = ['src', 'tools', 'sandbox'].flatMap(sourceFiles);
const graph = importGraph(files);

describe('architecture (docs/ARCHITECTURE.md, "Layers")', () => {
  it('names every product file in exactly one layer', () => {
    expect(table.length).toBeGreaterThan(5);
    expect(files.filter((file) => layerOf(file, table) < 0)).toEqual([]);
  });

  it('has no file that imports a file of a higher layer', () => {
    const upward = [...graph].flatMap(([file, targets]) =>
      targets
        .filter((target) => layerOf(target, table) < layerOf(file, table))
        .map((target) => `${file} (${table[layerOf(file, table)]!.name}) imports ${target} (${table[layerOf(target, table)]!.name})`),
    );
    expect(upward).toEqual([]);
  });

  it('has no import circle', () => {
    expect(circles(graph).map((circle) => circle.join(' -> '))).toEqual([]);
  });

  it('catches an upward import and a circle when there is one', () => {
    const planted = new Map(graph);
    planted.set('src/util/errors.ts', ['src/core/engine.ts']);
    planted.set('src/core/engine.ts', [...(graph.get('src/core/engine.ts') ?? []), 'src/util/errors.ts']);
    expect(layerOf('src/core/engine.ts', table)).toBeLessThan(layerOf('src/util/errors.ts', table));
    expect(circles(planted).length).toBeGreaterThan(0);
  });
});
