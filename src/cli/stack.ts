// The stack of an internal error (exit 70) in the sources' terms. The CLI runs from a bundle (dist/bin,
// scripts/bundle-cli.ts) whose positions mean nothing to a reader; node's --enable-source-maps would map
// them, but reading the maps at every start costs about 50 ms. They are read here only when a stack is
// printed, with node's own source-map reader.

import { existsSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { fileURLToPath } from 'node:url';

/** A frame's location in a JavaScript file: `file:///…/x.js:12:34`. */
const FRAME = /(file:\/\/[^\s()]+?\.js):(\d+):(\d+)/g;

function mapOf(url: string, cache: Map<string, SourceMap | undefined>): SourceMap | undefined {
  if (cache.has(url)) return cache.get(url);
  let map: SourceMap | undefined;
  try {
    const file = `${fileURLToPath(url)}.map`;
    if (existsSync(file)) map = new SourceMap(JSON.parse(readFileSync(file, 'utf8')));
  } catch {
    // A map that cannot be read leaves the frame as it is: the stack must print whatever happens.
    map = undefined;
  }
  cache.set(url, map);
  return map;
}

/** Each `file.js:line:column` with a map beside it becomes the source's `file.ts:line:column`. */
export function mapStack(stack: string): string {
  const cache = new Map<string, SourceMap | undefined>();
  return stack.replace(FRAME, (frame, url: string, line: string, column: string) => {
    const entry = mapOf(url, cache)?.findEntry(Number(line) - 1, Number(column) - 1);
    if (!entry || !('originalSource' in entry) || typeof entry.originalSource !== 'string') return frame;
    // The map names its sources relative to itself (`../../src/cli/main.ts`).
    const source = new URL(entry.originalSource, url).href;
    return `${source}:${entry.originalLine + 1}:${entry.originalColumn + 1}`;
  });
}
