import type { LineCounter } from 'yaml';
import type { SourcePos } from './types.js';

export function joinPath(parent: string, key: string | number): string {
  return parent === '' ? String(key) : `${parent}.${key}`;
}

/**
 * Where each value of a parsed file sits, by dotted path (`tasks.0.input.prompt`). Offsets are kept
 * instead of YAML nodes so that positions stay cheap; line and column are computed on demand.
 */
export class SourceIndex {
  readonly file: string;
  #text: string;
  #lines: LineCounter;
  #values = new Map<string, number>();
  #keys = new Map<string, number>();
  #ends = new Map<string, number>();

  constructor(file: string, text: string, lines: LineCounter) {
    this.file = file;
    this.#text = text;
    this.#lines = lines;
  }

  record(path: string, valueStart: number, keyStart?: number, valueEnd?: number): void {
    this.#values.set(path, valueStart);
    if (keyStart !== undefined) this.#keys.set(path, keyStart);
    if (valueEnd !== undefined) this.#ends.set(path, valueEnd);
  }

  has(path: string): boolean {
    return this.#values.has(path);
  }

  posOf(offset: number): SourcePos {
    const { line, col } = this.#lines.linePos(offset);
    return { file: this.file, line, col };
  }

  /** The value at `path`, or the nearest enclosing value that was recorded. */
  at(path: string): SourcePos {
    let current = path;
    for (;;) {
      const offset = this.#values.get(current);
      if (offset !== undefined) return this.posOf(offset);
      if (current === '') return { file: this.file, line: 1, col: 1 };
      const dot = current.lastIndexOf('.');
      current = dot === -1 ? '' : current.slice(0, dot);
    }
  }

  /** The key of the pair at `path` (where a typo'd key is written), else the value. */
  keyAt(path: string): SourcePos {
    const offset = this.#keys.get(path);
    return offset === undefined ? this.at(path) : this.posOf(offset);
  }

  /**
   * Position of the `occurrence`-th `needle` inside the scalar at `path`, when the scalar is written on
   * one line; the scalar itself otherwise (escapes and folding make offsets in longer text unreliable).
   */
  inScalar(path: string, needle: string, occurrence: number): SourcePos {
    const start = this.#values.get(path);
    const end = this.#ends.get(path);
    if (start === undefined || end === undefined) return this.at(path);
    const source = this.#text.slice(start, end);
    if (source.includes('\n')) return this.posOf(start);
    let found = -1;
    for (let i = 0; i <= occurrence; i++) {
      found = source.indexOf(needle, found + 1);
      if (found === -1) return this.posOf(start);
    }
    return this.posOf(start + found);
  }
}
