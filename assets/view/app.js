// @ts-check
// The view's page: a hash router over three pages and one EventSource. A change in the state file
// arrives as an event within about a quarter of a second; counters move at once, the rest is read
// again through the JSON API (at most every REFRESH_MS). Each route has a token: a page still loading
// when the reader moves on is dropped, so a slow answer never draws over the newer page.
import { h } from './dom.js';
import { loadLists } from './lists.js';
import { installReviewKeys } from './review.js';
import { runPage } from './run-page.js';
import { runsPage } from './runs-page.js';
import { taskPage } from './task-page.js';

/**
 * @typedef {{
 *   onRun(event: import('./api-types').RunEvent): void,
 *   onWorkers?(event: import('./api-types').WorkersAnswer): void,
 *   refresh(): Promise<void>,
 * }} Page
 */

/**
 * The page reads the run again at most this often while events arrive (counters move at once from the
 * event itself): a live run of thousands of tasks then costs the machine little, as the runner shares it.
 */
const REFRESH_MS = 2000;
/** Events that come together (one commit touches several rows) are gathered into one read. */
const GATHER_MS = 150;
/**
 * The next read waits at least this many times the last one took: a loaded machine (the runner, under
 * `run --view`, serves the page from its own process) answers slower, and is then asked less often.
 */
const READ_COST_FACTOR = 20;
const main = /** @type {HTMLElement} */ (document.getElementById('main'));
const live = /** @type {HTMLElement} */ (document.getElementById('live'));
const away = /** @type {HTMLElement} */ (document.getElementById('away'));
/** @type {Page} */
const IDLE = { onRun() {}, refresh: async () => {} };
let current = IDLE;
/** @type {ReturnType<typeof setTimeout> | null} */
let pending = null;
let reading = false;
let again = false;
let lastRead = Number.NEGATIVE_INFINITY;
let lastReadMs = 0;
let routeSeq = 0;
/** Where the reader was scrolled on each page left: back on it, they are there again; a new page starts at the top. */
const scrolled = new Map();
let shownHash = location.hash;

/** @returns {import('./page-types').Route} */
function parseRoute() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  if (parts[0] === 'run' && parts[1] && parts[2] === 'task' && parts[3])
    return { page: 'task', run: parts[1], task: parts.slice(3).join('/') };
  if (parts[0] === 'run' && parts[1]) return { page: 'run', run: parts[1] };
  return { page: 'runs' };
}

/** @param {unknown} error */
const messageOf = (error) => (error instanceof Error ? error.message : String(error));

async function route() {
  scrolled.set(shownHash, window.scrollY);
  shownHash = location.hash;
  const seq = ++routeSeq;
  /** Still the route the reader is on: pages check it after every answer before they draw. */
  const isCurrent = () => seq === routeSeq;
  const r = parseRoute();
  // The old page's refreshes stop at once: an answer for it must not land on the new one.
  current = IDLE;
  delete main.dataset['ready'];
  try {
    const page =
      r.page === 'task'
        ? await taskPage(main, r.run, r.task, isCurrent)
        : r.page === 'run'
          ? await runPage(main, r.run, isCurrent)
          : await runsPage(main, isCurrent);
    if (!isCurrent() || page === null) return;
    current = page;
    document.title =
      r.page === 'runs' ? 'mediabatch view' : `${r.page === 'task' ? r.task : r.run} · mediabatch view`;
    window.scrollTo(0, scrolled.get(shownHash) ?? 0);
  } catch (error) {
    if (isCurrent()) main.replaceChildren(h('p.error', { role: 'alert' }, messageOf(error)));
  }
}

/**
 * One read at a time, started at most every REFRESH_MS (counted from the start of the last read); the
 * first after a quiet spell waits only GATHER_MS, so a single change shows at once. Events that come
 * while a read is in flight ask for one more after it.
 */
function scheduleRefresh() {
  if (reading) {
    again = true;
    return;
  }
  if (pending !== null) return;
  const gap = Math.max(REFRESH_MS, READ_COST_FACTOR * lastReadMs);
  const wait = Math.max(GATHER_MS, lastRead + gap - Date.now());
  pending = setTimeout(read, wait);
}

/** Reads now, or right after the read in flight (two reads at once could land in either order). */
function refreshNow() {
  if (pending !== null) clearTimeout(pending);
  pending = null;
  if (reading) again = true;
  else void read();
}

async function read() {
  pending = null;
  reading = true;
  lastRead = Date.now();
  try {
    await current.refresh();
  } catch (error) {
    live.textContent = `update failed: ${messageOf(error)}`;
  } finally {
    lastReadMs = Date.now() - lastRead;
    reading = false;
    if (again) {
      again = false;
      scheduleRefresh();
    }
  }
}

function connect() {
  const events = new EventSource('/api/events');
  events.addEventListener('open', () => {
    live.textContent = 'live';
    live.dataset['live'] = 'on';
  });
  events.addEventListener('error', () => {
    live.textContent = 'reconnecting…';
    live.dataset['live'] = 'off';
  });
  events.addEventListener('run', (e) => {
    current.onRun(JSON.parse(/** @type {MessageEvent} */ (e).data));
    scheduleRefresh();
  });
  for (const name of ['runs', 'tasks']) events.addEventListener(name, scheduleRefresh);
  // The workers panel is drawn from the event itself: a heartbeat needs no read.
  events.addEventListener('workers', (e) =>
    current.onWorkers?.(JSON.parse(/** @type {MessageEvent} */ (e).data)),
  );
  events.addEventListener('store', (e) => onStore(JSON.parse(/** @type {MessageEvent} */ (e).data)));
}

/**
 * The state database went away (a PostgreSQL server stopped or out of reach) or came back: said above
 * the page while it is away; when it is back the page reads again (its first read, if that failed).
 * @param {import('./api-types').StoreEvent} e
 */
function onStore(e) {
  away.hidden = e.reachable;
  away.textContent = e.reachable ? '' : `${e.error}: the page reads again when it is back`;
  if (!e.reachable) return;
  if (current === IDLE) route();
  else scheduleRefresh();
}

window.addEventListener('hashchange', route);
// After a decision the page reads again at once; the live feed moves the counters of other tabs.
window.addEventListener('mb:decided', refreshNow);
installReviewKeys();
// The lists the pages share with the server come first; a page that cannot read them says why.
loadLists().then(
  () => {
    route();
    connect();
  },
  (error) => main.replaceChildren(h('p.error', { role: 'alert' }, messageOf(error))),
);
