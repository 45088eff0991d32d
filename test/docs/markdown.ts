// The user-facing pages and what the docs tests read from them: fenced blocks (with the marker comment
// above each), links, headings. Parsed with marked's lexer, so a link inside a code block is not a link.
import { readFileSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import GithubSlugger from 'github-slugger';
import { Lexer, type Token, type Tokens } from 'marked';
import { globSync } from 'tinyglobby';

export const ROOT = resolve(import.meta.dirname, '../..');

/** README.md and every page under docs/ (those other branches add are picked up as they land). */
export function docFiles(): string[] {
  const pages = globSync('docs/**/*.md', { cwd: ROOT, absolute: true }).sort();
  return [resolve(ROOT, 'README.md'), ...pages];
}

export function shown(file: string): string {
  return relative(ROOT, file);
}

export interface CodeBlock {
  file: string;
  line: number;
  lang: string;
  text: string;
  /** The HTML comment just above the block (`<!-- error: … -->`), without its delimiters. */
  marker?: string;
}

/** Top-level tokens with the 1-based line each starts on. */
function lexWithLines(source: string): { token: Token; line: number }[] {
  let line = 1;
  return new Lexer({ gfm: true }).lex(source).map((token) => {
    const at = line;
    line += (token.raw.match(/\n/g) ?? []).length;
    return { token, line: at };
  });
}

export function codeBlocks(file: string): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  let marker: string | undefined;
  for (const { token, line } of lexWithLines(readFileSync(file, 'utf8'))) {
    if (token.type === 'space') continue;
    if (token.type === 'html') {
      const comment = /^<!--\s*([\s\S]*?)\s*-->\s*$/.exec(token.raw.trim());
      marker = comment?.[1];
      continue;
    }
    if (token.type === 'code') {
      const code = token as Tokens.Code;
      // The fence line is the block's first line; its content starts on the next.
      blocks.push({
        file,
        line: line + 1,
        lang: (code.lang ?? '').trim(),
        text: code.text,
        ...(marker ? { marker } : {}),
      });
    }
    marker = undefined;
  }
  return blocks;
}

/** Every token under a token, depth first: list items, table cells, paragraphs' inline tokens. */
function* walk(tokens: readonly Token[]): Generator<Token> {
  for (const token of tokens) {
    yield token;
    // Tokens of every kind carry their children in one of these; marked's union has no common field for them.
    const t = token as {
      tokens?: Token[];
      items?: Token[];
      header?: Tokens.TableCell[];
      rows?: Tokens.TableCell[][];
    };
    if (t.tokens) yield* walk(t.tokens);
    if (t.items) yield* walk(t.items);
    for (const cell of t.header ?? []) yield* walk(cell.tokens);
    for (const row of t.rows ?? []) for (const cell of row) yield* walk(cell.tokens);
  }
}

export interface Link {
  file: string;
  line: number;
  href: string;
}

export function links(file: string): Link[] {
  const found: Link[] = [];
  for (const { token, line } of lexWithLines(readFileSync(file, 'utf8'))) {
    for (const t of walk([token])) {
      if (t.type === 'link' || t.type === 'image') found.push({ file, line, href: (t as Tokens.Link).href });
    }
  }
  return found;
}

/** The text a heading shows, as GitHub slugs it: code spans and links reduced to their text. */
function plainText(tokens: readonly Token[]): string {
  return tokens
    .map((t) => {
      const inner = (t as Partial<Tokens.Generic>).tokens;
      if (Array.isArray(inner) && inner.length > 0) return plainText(inner as Token[]);
      return 'text' in t && typeof t.text === 'string' ? t.text : '';
    })
    .join('');
}

/** The anchors GitHub gives a page's headings (`## Exit codes` → `exit-codes`, repeats get `-1`, `-2`). */
export function anchors(file: string): Set<string> {
  const slugger = new GithubSlugger();
  const found = new Set<string>();
  for (const token of new Lexer({ gfm: true }).lex(readFileSync(file, 'utf8'))) {
    if (token.type === 'heading') found.add(slugger.slug(plainText((token as Tokens.Heading).tokens)));
  }
  return found;
}

/** The text of every inline code span of a page (tables and lists included). */
export function codeSpans(file: string): string[] {
  const spans: string[] = [];
  for (const t of walk(new Lexer({ gfm: true }).lex(readFileSync(file, 'utf8')))) {
    if (t.type === 'codespan') spans.push((t as Tokens.Codespan).text);
  }
  return spans;
}

/** The first cell of every table row of a page, as written (backticks kept). */
export function tableFirstCells(file: string): string[] {
  const cells: string[] = [];
  for (const t of walk(new Lexer({ gfm: true }).lex(readFileSync(file, 'utf8')))) {
    if (t.type !== 'table') continue;
    for (const row of (t as Tokens.Table).rows) {
      const first = row[0];
      if (first) cells.push(first.text.trim());
    }
  }
  return cells;
}
