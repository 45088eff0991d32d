import {
  type Document,
  isAlias,
  isMap,
  isScalar,
  isSeq,
  LineCounter,
  parseDocument,
  type YAMLError,
} from 'yaml';
import { MediabatchError } from '../errors.js';
import { MAX_ALIAS_VALUES, MAX_DEPTH } from './limits.js';
import { joinPath, SourceIndex } from './source-index.js';
import type { ManifestProblem } from './types.js';
import { type PlainObject, setOwn } from './values.js';

/** `value` is absent when the text could not be read as YAML; `problems` may be set either way. */
export interface ParsedYaml {
  value?: unknown;
  index: SourceIndex;
  problems: ManifestProblem[];
}

export interface ParseYamlOptions {
  /** Record positions only down to this depth (data files need rows, not every cell). */
  recordDepth?: number;
}

class Stop extends MediabatchError {
  constructor(
    readonly offset: number,
    readonly reason: string,
  ) {
    super(reason);
  }
}

/** Parses one YAML document into plain values plus a position for every value, or located problems. */
export function parseYaml(text: string, file: string, options: ParseYamlOptions = {}): ParsedYaml {
  const lineCounter = new LineCounter();
  const index = new SourceIndex(file, text, lineCounter);
  // yaml's maxAliasCount only guards toJS(); the conversion below keeps positions, so it counts
  // alias expansion itself (MAX_ALIAS_VALUES).
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const errors = doc.errors;
  const problems = errors.map((error) => yamlProblem(error, text, index));
  // A duplicate key leaves a usable document: check the rest too, so every problem shows at once.
  if (!errors.every((error) => error.code === 'DUPLICATE_KEY')) return { index, problems };
  const converted = convertDocument(doc.contents, index, doc, options);
  return { ...converted, problems: [...problems, ...converted.problems] };
}

function convertDocument(
  root: unknown,
  index: SourceIndex,
  doc: Document,
  options: ParseYamlOptions,
): ParsedYaml {
  try {
    const value = convertWith(root, doc, index, options.recordDepth ?? Number.POSITIVE_INFINITY);
    return { value, index, problems: [] };
  } catch (error) {
    if (error instanceof Stop) {
      return { index, problems: [{ pos: index.posOf(error.offset), path: '', message: error.reason }] };
    }
    throw error;
  }
}

function yamlProblem(error: YAMLError, text: string, index: SourceIndex): ManifestProblem {
  const pos = index.posOf(error.pos[0]);
  if (error.code === 'DUPLICATE_KEY') {
    const written = /^(?:"(?:[^"\\]|\\.)*"|'[^']*'|[^:,}\n]*)/.exec(text.slice(error.pos[0]))?.[0] ?? '';
    const key = written.trim().replace(/^(["'])(.*)\1$/, '$2');
    return {
      pos,
      path: '',
      message: `duplicate key ${JSON.stringify(key)}; each key may appear only once here`,
    };
  }
  if (error.code === 'MULTIPLE_DOCS') {
    return {
      pos,
      path: '',
      message: 'more than one YAML document (a second "---"); keep one document per file',
    };
  }
  const first = error.message.split('\n')[0] ?? error.message;
  if (/call stack/i.test(first)) {
    // The parser recursed out of stack on thousands of nested brackets: say so in the file's terms.
    return {
      pos,
      path: '',
      message: `values are nested deeper than the YAML parser can follow (more than ${MAX_DEPTH} levels is refused anyway); flatten the file`,
    };
  }
  return { pos, path: '', message: `invalid YAML: ${first.replace(/ at line \d+, column \d+:?$/, '')}` };
}

function convertWith(root: unknown, doc: Document, index: SourceIndex, recordDepth: number): unknown {
  let aliasValues = 0;
  // The alias written in the file whose expansion is under way: the place to point at for a bomb.
  let outerAlias = 0;
  // Anchors seen so far in document order; Alias.resolve() would rescan the whole document per alias.
  const anchors = new Map<string, unknown>();

  const convert = (
    node: unknown,
    path: string,
    depth: number,
    viaAlias: boolean,
    keyStart?: number,
  ): unknown => {
    if (depth > MAX_DEPTH) {
      throw new Stop(startOf(node), `values are nested deeper than ${MAX_DEPTH} levels; flatten the file`);
    }
    if (viaAlias && ++aliasValues > MAX_ALIAS_VALUES) {
      throw new Stop(
        outerAlias,
        `YAML aliases (*name) expand to more than ${MAX_ALIAS_VALUES} values, which looks like an alias bomb; write the values out or use vars and defaults instead of anchors`,
      );
    }
    const record = depth <= recordDepth;
    if (isAlias(node)) {
      if (!viaAlias) outerAlias = startOf(node);
      const target = anchors.get(node.source) ?? node.resolve(doc);
      if (target === undefined) throw new Stop(startOf(node), `unknown YAML alias *${node.source}`);
      if (record) index.record(path, startOf(node), keyStart);
      return convert(target, path, depth, true);
    }
    if (!viaAlias && (isScalar(node) || isMap(node) || isSeq(node)) && node.anchor)
      anchors.set(node.anchor, node);
    if (isScalar(node)) {
      const value = node.value;
      if (record) {
        const end = typeof value === 'string' ? node.range?.[1] : undefined;
        index.record(path, startOf(node), keyStart, end);
      }
      return typeof value === 'bigint' ? Number(value) : value;
    }
    if (isMap(node)) {
      if (record) index.record(path, startOf(node), keyStart);
      const object: PlainObject = {};
      for (const pair of node.items) {
        const key = keyText(pair.key, doc);
        const childPath = joinPath(path, key);
        const childKeyStart = startOf(pair.key);
        if (pair.value === null || pair.value === undefined) {
          if (depth + 1 <= recordDepth) index.record(childPath, childKeyStart, childKeyStart);
          setOwn(object, key, null);
        } else {
          setOwn(object, key, convert(pair.value, childPath, depth + 1, viaAlias, childKeyStart));
        }
      }
      return object;
    }
    if (isSeq(node)) {
      if (record) index.record(path, startOf(node), keyStart);
      return node.items.map((item, i) => convert(item, joinPath(path, i), depth + 1, viaAlias));
    }
    return null;
  };

  return convert(root, '', 0, false);
}

function keyText(key: unknown, doc: Document): string {
  const resolved = isAlias(key) ? key.resolve(doc) : key;
  if (isScalar(resolved)) return String(resolved.value);
  throw new Stop(startOf(key), 'keys must be plain text, not lists or mappings');
}

function startOf(node: unknown): number {
  if (typeof node === 'object' && node !== null && 'range' in node) {
    const range = (node as { range?: [number, number, number] | null }).range;
    if (range) return range[0];
  }
  return 0;
}
