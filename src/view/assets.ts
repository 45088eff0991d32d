// The page's files: ours under assets/view (plain ES modules and CSS, no build step, so `npm start`,
// tsx and the packed package all find them), and uPlot from its npm package. Served only by name.

import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** src/view/, dist/view/ and the CLI bundle's dist/bin/ are all two levels below the package root. */
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const OWN = join(ROOT, 'assets', 'view');

export interface Asset {
  body: Buffer;
  type: string;
}

const JS = 'text/javascript; charset=utf-8';
const CSS = 'text/css; charset=utf-8';

function uplotFile(name: string): string {
  const require = createRequire(import.meta.url);
  return join(dirname(require.resolve('uplot/package.json')), 'dist', name);
}

/**
 * Every file the page may load, by the name in its URL (/assets/<name>): the scripts and styles in
 * assets/view (not its type declarations nor its tsconfig) and uPlot's two; nothing else is served.
 */
export function loadAssets(): Map<string, Asset> {
  const own = readdirSync(OWN)
    .filter((name) => /^[\w-]+\.(js|css)$/.test(name))
    .map((name): [string, string, string] => [name, join(OWN, name), name.endsWith('.css') ? CSS : JS]);
  const files: Array<[string, string, string]> = [
    ...own,
    ['uPlot.esm.js', uplotFile('uPlot.esm.js'), JS],
    ['uPlot.min.css', uplotFile('uPlot.min.css'), CSS],
  ];
  const assets = new Map<string, Asset>();
  for (const [name, path, type] of files) assets.set(name, { body: readFileSync(path), type });
  return assets;
}

/**
 * The page. Served to the printed address (`/?token=`), it holds the token and the page to open first
 * in meta tags: its script keeps the token in the page's own storage (never in a cookie, which reaches
 * every local port) and sends it as the header that writes need. Served to a cookie, it holds neither.
 */
export function indexHtml(token = '', start = ''): Buffer {
  const html = readFileSync(join(OWN, 'index.html'), 'utf8');
  const safe = (text: string) => text.replace(/[&"<>]/g, (c) => `&#${c.charCodeAt(0)};`);
  return Buffer.from(
    html.replace(
      '<meta name="mediabatch-token" content="">',
      `<meta name="mediabatch-token" content="${safe(token)}">\n<meta name="mediabatch-start" content="${safe(start)}">`,
    ),
  );
}
