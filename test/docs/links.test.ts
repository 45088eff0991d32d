// Every relative link in README.md, ARCHITECTURE.md and docs/ leads to a file that exists, and a link with
// an anchor to a heading that page has (as GitHub slugs it). Web links are left to the reader.
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { anchors, docFiles, type Link, links, ROOT, shown } from './markdown.js';

/**
 * Pages other branches write that these pages already link to. Until each lands, a link to
 * it may not resolve; once the file exists it is checked like any other, anchors included.
 */
const PAGES_TO_COME = new Set(['docs/view.md', 'docs/review.md', 'docs/shards.md']);

const files = [...docFiles(), resolve(ROOT, 'ARCHITECTURE.md')];
const relativeLinks = (file: string) => links(file).filter((link) => !/^[a-z][a-z0-9+.-]*:/i.test(link.href));

/** What is wrong with a link, or undefined. */
function broken(link: Link): string | undefined {
  const [path = '', anchor] = link.href.split('#', 2);
  const target = path === '' ? link.file : resolve(dirname(link.file), decodeURI(path));
  if (!existsSync(target)) {
    return PAGES_TO_COME.has(shown(target)) ? undefined : `no such file: ${shown(target)}`;
  }
  if (anchor === undefined || anchor === '') return undefined;
  if (!target.endsWith('.md')) return `an anchor into a file that is not a page: ${shown(target)}`;
  return anchors(target).has(decodeURIComponent(anchor))
    ? undefined
    : `no heading "#${anchor}" in ${shown(target)}; its anchors: ${[...anchors(target)].join(', ')}`;
}

describe('links between the docs', () => {
  it('are found in README.md and the pages', () => {
    // A guard: were the files or their links not found, every case below would pass by checking nothing.
    const all = files.flatMap(relativeLinks);
    expect(all.length).toBeGreaterThan(50);
    expect(all.filter((l) => l.href.includes('#')).length).toBeGreaterThan(5);
  });

  it.each(files.map(shown))('%s: every relative link resolves', (file) => {
    const problems = relativeLinks(resolve(ROOT, file)).flatMap((link) => {
      const why = broken(link);
      return why ? [`${file}:${link.line} ${link.href}: ${why}`] : [];
    });
    expect(problems).toEqual([]);
  });
});
