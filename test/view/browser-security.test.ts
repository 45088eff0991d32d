// The view in Debian's chromium against a program on another local port: the browser sends that program
// the view's cookie (browsers do not separate cookies by port), and the program gets no further than
// reading; a page it serves posts at the view and changes nothing; a cookie of the same name it plants
// does not lock the user out. A task id of 150 characters has its card, its image and its task page.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readKey } from '../../src/view/security.js';
import { startView, type ViewServer } from '../../src/view/server.js';
import { CHROMIUM, requireBrowser, SKIP_BROWSER } from '../helpers/browser.js';
import { VARIANTS } from '../helpers/review-chain.js';
import { makeRunEnv, type RunEnv, taskStates } from '../helpers/run-env.js';
import { raw } from './helpers.js';

requireBrowser();

// The callbacks below run in the page: the browser's globals, typed as far as these tests use them.
declare const document: {
  querySelectorAll(s: string): ArrayLike<{ complete: boolean; naturalWidth: number; href: string }>;
  querySelector(s: string): { textContent: string | null } | null;
};
declare const location: { hash: string };
declare function fetch(url: string): Promise<{ status: number }>;

const LONG = `still-${'long-'.repeat(30)}`.slice(0, 150);
/** Every character a URL treats specially, and some it does not know. */
const ODD = 'odd/id ?a=1&b#2 %2F..%20 "q" é€ +';

let env: RunEnv;
let view: ViewServer;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let other: Server;
let otherPort: number;
/** Every request the program on the other port received: what the browser sent it. */
const received: Array<{ url: string; headers: IncomingHttpHeaders }> = [];
let attacked: () => void = () => undefined;

async function balance(): Promise<number> {
  const answer = await request(`${env.sandbox.baseUrl}/_sandbox/state`);
  return ((await answer.body.json()) as { balance: number }).balance;
}

/** A page on another local port that tries to decide at the view, then says it is done. */
function attackPage(viewPort: number): string {
  const target = `http://127.0.0.1:${viewPort}/api/runs/batch/decisions`;
  const body = JSON.stringify({ taskIds: ['still-mug-1'], verdict: 'reroll' });
  return `<!doctype html><html><body>
<form id="f" method="POST" action="${target}" enctype="text/plain" target="sink">
<input type="hidden" name='${body.slice(0, -1)},"x":"' value='"}'></form>
<iframe name="sink"></iframe>
<script>
(async () => {
  const tries = [
    fetch(${JSON.stringify(target)}, { method: 'POST', mode: 'no-cors', credentials: 'include',
      headers: { 'content-type': 'text/plain' }, body: ${JSON.stringify(body)} }).catch(() => null),
    fetch(${JSON.stringify(target)}, { method: 'POST', credentials: 'include',
      headers: { 'content-type': 'application/json', 'x-mediabatch-token': 'guess' },
      body: ${JSON.stringify(body)} }).catch(() => null),
  ];
  document.getElementById('f').submit();
  await Promise.all(tries);
  await new Promise((r) => setTimeout(r, 500));
  await fetch('/done');
})();
</script></body></html>`;
}

describe.skipIf(SKIP_BROWSER)('the view against a program on another local port, in chromium', () => {
  beforeAll(async () => {
    env = await makeRunEnv();
    const file = await env.manifest({
      tasks: [
        ...VARIANTS,
        { id: LONG, model: 'flat-image', review: true, input: { prompt: 'a mug with a long name' } },
        { id: ODD, model: 'flat-image', input: { prompt: 'a mug with an odd name' } },
      ],
      concurrency: 8,
      budget: 200,
    });
    const ran = await env.run(['run', file, '--yes']);
    if (ran.code !== 4) throw new Error(`run exited ${ran.code}: ${ran.stderr}`);
    view = await startView({ stateFile: env.db, cwd: env.dir });
    other = createServer((req, res) => {
      received.push({ url: req.url ?? '', headers: req.headers });
      if (req.url === '/done') {
        attacked();
        res.end('ok');
        return;
      }
      // Cookies of the view's name, as another program on 127.0.0.1 may set them: one for /api (sent
      // first there), one in place of the view's own (same name and path).
      const name = `mediabatch_view_${view.port}`;
      const planted = [`${name}=planted-for-api; Path=/api`];
      if (req.url === '/overwrite') planted.push(`${name}=overwritten; Path=/`);
      res.writeHead(200, { 'content-type': 'text/html', 'set-cookie': planted });
      res.end(req.url === '/' ? attackPage(view.port) : 'planted');
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    otherPort = (other.address() as AddressInfo).port;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    context = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
    page = await context.newPage();
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => other?.close(resolve));
    await view?.close();
    await env?.close();
  });

  it('loads the card, the image and the task page of a task whose id has 150 characters', async () => {
    expect(LONG).toHaveLength(150);
    await page.goto(view.url);
    expect(new URL(page.url()).search).toBe('');
    await page.evaluate(() => {
      location.hash = '#/run/batch';
    });
    await page.waitForSelector('main[data-ready="run"]');
    const card = page.locator(`article.card[data-task="${LONG}"]`);
    await card.scrollIntoViewIfNeeded();
    await page.waitForFunction(
      (id) => {
        const imgs = document.querySelectorAll(`article.card[data-task="${id}"] img.thumb`);
        return imgs.length === 1 && imgs[0]?.complete === true && (imgs[0]?.naturalWidth ?? 0) > 0;
      },
      LONG,
      { timeout: 15_000 },
    );
    await card.locator('h3 a').click();
    await page.waitForSelector('main[data-ready="task"]');
    expect(await page.textContent('main')).toContain(LONG);
    const statuses = await page.evaluate(async () => {
      const links = Array.from(document.querySelectorAll('main a[href^="/files/"]'));
      return Promise.all(links.map(async (a) => (await fetch(a.href)).status));
    });
    expect(statuses).toEqual([200]);
    // The person at the page decides, after a reload too: the page served to the cookie holds no token,
    // the one kept in this origin's storage is sent.
    await page.reload();
    await page.waitForSelector('main[data-ready="task"]');
    expect(await page.content()).toContain('<meta name="mediabatch-token" content="">');
    await page.keyboard.press('a');
    await expect
      .poll(() => env.query<{ verdict: string }>('SELECT verdict FROM decisions WHERE task_id = ?', LONG))
      .toEqual([{ verdict: 'approve' }]);
  });

  it('serves a task whose id holds /, ?, #, % and more in every route: its page, its file, HEAD, the price', async () => {
    const auth = { authorization: `Bearer ${view.token}` };
    const id = encodeURIComponent(ODD);
    const detail = await raw(view.port, `/api/runs/batch/tasks/${id}`, auth);
    expect(detail.status).toBe(200);
    expect(JSON.parse(detail.text).task.id).toBe(ODD);
    const [file] = JSON.parse(detail.text).files as Array<{ url: string; bytes: number }>;
    expect(file?.url).toBe(`/files/batch/${id}/1`);
    const got = await raw(view.port, file?.url ?? '', auth);
    expect(got.status).toBe(200);
    expect(got.body.length).toBe(file?.bytes);
    const head = await raw(view.port, file?.url ?? '', auth, 'HEAD');
    expect(head.headers['content-length']).toBe(String(file?.bytes));
    const listed = await raw(view.port, `/api/runs/batch/tasks?q=${encodeURIComponent('%2F..%20')}`, auth);
    expect(JSON.parse(listed.text).tasks.map((t: { id: string }) => t.id)).toEqual([ODD]);
    const price = await raw(
      view.port,
      `/api/runs/batch/reroll-price?taskIds=${encodeURIComponent(LONG)}`,
      auth,
    );
    expect(price.status).toBe(200);
    // In the page: its card's image loads and its link opens its page.
    await page.goto(`http://127.0.0.1:${view.port}/#/run/batch`);
    await page.waitForSelector('main[data-ready="run"]');
    const card = page.locator(`article.card[data-task="${ODD.replace(/["\\]/g, '\\$&')}"]`);
    await card.scrollIntoViewIfNeeded();
    await expect
      .poll(() => card.locator('img.thumb').evaluate((img: { naturalWidth: number }) => img.naturalWidth))
      .toBeGreaterThan(0);
    await card.locator('h3 a').click();
    await page.waitForSelector('main[data-ready="task"]');
    expect(await page.textContent('main')).toContain(ODD);
  });

  it('sends the program on another port the cookie, which lets it read but not approve, reject or re-roll', async () => {
    const before = { balance: await balance(), states: taskStates(env) };
    const done = new Promise<void>((resolve) => {
      attacked = resolve;
    });
    await page.goto(`http://127.0.0.1:${otherPort}/`);
    await done;
    const sent = JSON.stringify(received);
    const key = readKey(view.token);
    expect(sent).toContain(`mediabatch_view_${view.port}=${key}`);
    expect(sent).not.toContain(view.token);

    // What the program can do with all it received: read, and nothing more.
    const cookie = String(received.find((r) => r.headers.cookie?.includes(key))?.headers.cookie);
    expect((await raw(view.port, '/api/runs/batch/tasks', { cookie })).status).toBe(200);
    expect((await raw(view.port, '/', { cookie })).text).not.toContain(view.token);
    const forged = { cookie, origin: `http://127.0.0.1:${view.port}`, 'sec-fetch-site': 'same-origin' };
    for (const verdict of ['approve', 'reject', 'reroll']) {
      for (const headers of [
        forged,
        { ...forged, 'x-mediabatch-token': key },
        { ...forged, authorization: `Bearer ${key}` },
      ]) {
        const body = JSON.stringify({ taskIds: ['still-mug-1'], verdict });
        const answer = await raw(
          view.port,
          '/api/runs/batch/decisions',
          { ...headers, 'content-type': 'application/json' },
          'POST',
          body,
        );
        expect([401, 403]).toContain(answer.status);
      }
    }
    expect(env.query("SELECT * FROM decisions WHERE task_id LIKE 'still-mug-%'")).toEqual([]);
    expect(taskStates(env)).toEqual(before.states);
    expect(await balance()).toBe(before.balance);
  });

  it('is not locked out by a cookie of the same name that the other program planted', async () => {
    // The planted cookie for /api is sent before the view's own on every read of the page.
    await page.goto(`http://127.0.0.1:${view.port}/#/run/batch`);
    await page.waitForSelector('main[data-ready="run"]');
    const cookies = await context.cookies(`http://127.0.0.1:${view.port}/api/runs`);
    expect(cookies.filter((c) => c.name === `mediabatch_view_${view.port}`)).toHaveLength(2);

    // One that replaces the view's own (same name and path): the open page's next read gives it back.
    await context.newPage().then(async (p) => {
      await p.goto(`http://127.0.0.1:${otherPort}/overwrite`);
      await p.close();
    });
    const own = async () =>
      (await context.cookies(`http://127.0.0.1:${view.port}/`)).find(
        (c) => c.name === `mediabatch_view_${view.port}` && c.path === '/',
      )?.value;
    expect(await own()).toBe('overwritten');
    await page.evaluate((id) => {
      location.hash = `#/run/batch/task/${encodeURIComponent(id)}`;
    }, LONG);
    await page.waitForSelector('main[data-ready="task"]');
    expect(await own()).toBe(readKey(view.token));
    const statuses = await page.evaluate(async () => {
      const links = Array.from(document.querySelectorAll('main a[href^="/files/"]'));
      return Promise.all(links.map(async (a) => (await fetch(a.href)).status));
    });
    expect(statuses).toEqual([200]);
  });
});
