// The shape of the code, measured with the TypeScript compiler: functions over 80 lines (and whether they
// say why), cycles between files, and imports that point up the layer order of src/ (LAYERS, drawn in
// ARCHITECTURE.md). `npx tsx scripts/code-shape.ts` lists all three; test/code/shape.test.ts fails on a
// new one.

import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

/** A function may be this long; longer only with a first comment line that starts with LONG_MARK. */
export const MAX_FUNCTION_LINES = 80;
export const LONG_MARK = 'Long on purpose:';

export interface LongFunction {
  file: string;
  name: string;
  line: number;
  lines: number;
  /** The first comment line says "Long on purpose:" and why. */
  marked: boolean;
}

/** Every .ts file under `dir`, sorted. */
export function tsFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...tsFiles(path));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) out.push(path);
  }
  return out.sort();
}

function parse(file: string): ts.SourceFile {
  return ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
}

/** The name a reader would search for: the declaration's, or the variable or property it is assigned to. */
function nameOf(node: ts.Node): string {
  const named = node as { name?: ts.Node };
  if (named.name && (ts.isIdentifier(named.name) || ts.isPrivateIdentifier(named.name)))
    return named.name.text;
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if (parent && (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) && parent.name) {
    return ts.isIdentifier(parent.name) ? parent.name.text : parent.name.getText();
  }
  return '(anonymous)';
}

/** The node whose leading comments describe the function (its variable statement for `const f = () =>`). */
function commentHolder(node: ts.Node): ts.Node {
  let holder: ts.Node = node;
  while (
    holder.parent &&
    (ts.isVariableDeclaration(holder.parent) ||
      ts.isVariableDeclarationList(holder.parent) ||
      ts.isVariableStatement(holder.parent) ||
      ts.isPropertyAssignment(holder.parent) ||
      ts.isExportAssignment(holder.parent))
  ) {
    holder = holder.parent;
  }
  return holder;
}

/** The first line of the comments just above the function, without the comment markers. */
function firstCommentLine(source: ts.SourceFile, node: ts.Node): string {
  const holder = commentHolder(node);
  const ranges = ts.getLeadingCommentRanges(source.text, holder.getFullStart()) ?? [];
  const first = ranges[0];
  if (!first) return '';
  const text = source.text.slice(first.pos, first.end);
  const lines = text
    .split('\n')
    .map((l) => l.replace(/^\s*(\/\*\*?|\*\/|\*|\/\/)\s?/, '').trim())
    .filter((l) => l !== '' && l !== '/');
  return lines[0] ?? '';
}

/** Every function, method, constructor and arrow of the files longer than MAX_FUNCTION_LINES. */
export function longFunctions(files: readonly string[], root: string): LongFunction[] {
  const out: LongFunction[] = [];
  for (const file of files) {
    const source = parse(file);
    const visit = (node: ts.Node): void => {
      if (ts.isFunctionLike(node) && (node as { body?: ts.Node }).body) {
        const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
        const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
        const lines = end - start + 1;
        if (lines > MAX_FUNCTION_LINES) {
          out.push({
            file: relative(root, file),
            name: nameOf(node),
            line: start + 1,
            lines,
            marked: firstCommentLine(source, node).startsWith(LONG_MARK),
          });
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return out;
}

/** The files a file imports (static imports and re-exports, type-only ones too), resolved within `files`. */
export function importsOf(file: string, known: ReadonlySet<string>): string[] {
  const source = parse(file);
  const out = new Set<string>();
  const add = (spec: string) => {
    if (!spec.startsWith('.')) return;
    const target = resolve(dirname(file), spec.replace(/\.js$/, '.ts'));
    if (known.has(target)) out.add(target);
    else if (known.has(join(target, 'index.ts'))) out.add(join(target, 'index.ts'));
  };
  for (const statement of source.statements) {
    if (
      (ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) &&
      statement.moduleSpecifier &&
      ts.isStringLiteral(statement.moduleSpecifier)
    ) {
      add(statement.moduleSpecifier.text);
    }
  }
  return [...out];
}

/**
 * The cycles between files: each strongly connected group of files that import one another (Tarjan's
 * algorithm), as paths relative to `root`, sorted. Lazy `await import()` is not an edge: it runs later.
 */
export function fileCycles(files: readonly string[], root: string): string[][] {
  const known = new Set(files.map((f) => resolve(f)));
  const graph = new Map([...known].map((f) => [f, importsOf(f, known)]));
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  let counter = 0;
  const connect = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter);
    counter++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v) ?? 0, low.get(w) ?? 0));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v) ?? 0, index.get(w) ?? 0));
      }
    }
    if (low.get(v) !== index.get(v)) return;
    const group: string[] = [];
    let w: string | undefined;
    do {
      w = stack.pop();
      if (w === undefined) break;
      onStack.delete(w);
      group.push(relative(root, w));
    } while (w !== v);
    if (group.length > 1 || (graph.get(v) ?? []).includes(v)) groups.push(group.sort());
  };
  for (const v of known) if (!index.has(v)) connect(v);
  return groups.sort((a, b) => (a[0] ?? '').localeCompare(b[0] ?? ''));
}

/**
 * The layers of src/, from the top down: a folder (or a file directly in src/) imports only from layers
 * below its own, never from its own layer's other members or from above. Type-only imports count: a type
 * that two layers share lives in the lower one. A new folder must be placed here before it can import.
 */
export const LAYERS: readonly (readonly string[])[] = [
  ['cli'],
  ['index.ts'],
  ['view', 'schedule'],
  ['run'],
  ['report'],
  ['account'],
  ['review'],
  ['results'],
  ['plan', 'sandbox', 'money'],
  ['store', 'config.ts'],
  ['api', 'manifest', 'storage'],
  ['catalog', 'media'],
  ['util', 'config-error.ts'],
  ['errors.ts'],
  ['exit-codes.ts'],
];

export interface LayerBreak {
  /** The importing file and the file it imports, relative to the root. */
  file: string;
  imports: string;
  /** Why: "util (layer 12) imports cli (layer 1)", or a folder missing from LAYERS. */
  why: string;
}

/** The top-level part of src/ a file belongs to: its folder, or its own name for a file in src/ itself. */
function partOf(file: string, src: string): string {
  const parts = relative(src, file).split('/');
  return parts[0] ?? file;
}

function layerOf(part: string, layers: readonly (readonly string[])[]): number {
  return layers.findIndex((layer) => layer.includes(part));
}

/** Every import between two parts of `src` that does not point down `layers`. */
export function layerBreaks(
  files: readonly string[],
  root: string,
  src = join(root, 'src'),
  layers: readonly (readonly string[])[] = LAYERS,
): LayerBreak[] {
  const known = new Set(files.map((f) => resolve(f)));
  const out: LayerBreak[] = [];
  for (const file of known) {
    const from = partOf(file, src);
    for (const target of importsOf(file, known)) {
      const to = partOf(target, src);
      if (from === to) continue;
      const [a, b] = [layerOf(from, layers), layerOf(to, layers)];
      const missing = [from, to].filter((_, i) => [a, b][i] === -1);
      if (missing.length === 0 && a < b) continue;
      const why =
        missing.length > 0
          ? `${missing.join(' and ')} not in the layer order (LAYERS in scripts/code-shape.ts)`
          : `${from} (layer ${a + 1}) imports ${to} (layer ${b + 1}), ${a === b ? 'the same layer' : 'a higher one'}`;
      out.push({ file: relative(root, file), imports: relative(root, target), why });
    }
  }
  return out.sort((x, y) => x.file.localeCompare(y.file) || x.imports.localeCompare(y.imports));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const root = process.cwd();
  const files = tsFiles(join(root, 'src'));
  const long = longFunctions(files, root).sort((a, b) => b.lines - a.lines);
  console.log(
    `Functions over ${MAX_FUNCTION_LINES} lines: ${long.length} (${long.filter((f) => !f.marked).length} without "${LONG_MARK}")`,
  );
  for (const f of long)
    console.log(`  ${f.lines}\t${f.marked ? 'marked' : 'NOT MARKED'}\t${f.file}:${f.line} ${f.name}`);
  const cycles = fileCycles(files, root);
  console.log(`File cycles: ${cycles.length}`);
  for (const c of cycles) console.log(`  ${c.join(' <-> ')}`);
  const breaks = layerBreaks(files, root);
  console.log(`Imports up the layers: ${breaks.length}`);
  for (const b of breaks) console.log(`  ${b.file} -> ${b.imports}: ${b.why}`);
}
