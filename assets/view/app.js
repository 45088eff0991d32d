// The view's page: a hash router over three pages and one EventSource. A change in the state file
// arrives as an event within about a quarter of a second; counters move at once, the rest is read
// again through the JSON API (at most every REFRESH_MS).
import { h } from './dom.js';
import { runPage, runsPage, taskPage } from './pages.js';
import { installReviewKeys } from './review.js';

/**
 * The page reads the run again at most this often while events arrive (counters move at once from the
 * event itself): a live run of thousands of tasks then costs the machine little, as the runner shares it.
 */
const REFRESH_MS = 600;
const main = document.getElementById('main');
const live = document.getElementById('live');
let current = { onRun() {}, refresh: async () => {} };
let pending = null;
let routeSeq = 0;

function parseRoute() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  if (parts[0] === 'run' && parts[1] && parts[2] === 'task' && parts[3])
    return { page: 'task', run: parts[1], task: parts.slice(3).join('/') };
  if (parts[0] === 'run' && parts[1]) return { page: 'run', run: parts[1] };
  return { page: 'runs' };
}

async function route() {
  const seq = ++routeSeq;
  const r = parseRoute();
  delete main.dataset.ready;
  try {
    const page =
      r.page === 'task'
        ? await taskPage(main, r.run, r.task)
        : r.page === 'run'
          ? await runPage(main, r.run)
          : await runsPage(main);
    if (seq === routeSeq) current = page;
    document.title = r.page === 'runs' ? 'mediabatch view' : `${r.task ?? r.run} · mediabatch view`;
  } catch (error) {
    main.replaceChildren(h('p.error', { role: 'alert' }, String(error.message ?? error)));
  }
}

function scheduleRefresh() {
  if (pending !== null) return;
  pending = setTimeout(async () => {
    pending = null;
    try {
      await current.refresh();
    } catch (error) {
      live.textContent = `update failed: ${error.message ?? error}`;
    }
  }, REFRESH_MS);
}

function connect() {
  const events = new EventSource('/api/events');
  events.addEventListener('open', () => {
    live.textContent = 'live';
    live.dataset.live = 'on';
  });
  events.addEventListener('error', () => {
    live.textContent = 'reconnecting…';
    live.dataset.live = 'off';
  });
  events.addEventListener('run', (e) => {
    current.onRun(JSON.parse(e.data));
    scheduleRefresh();
  });
  for (const name of ['runs', 'tasks']) events.addEventListener(name, scheduleRefresh);
}

window.addEventListener('hashchange', route);
// After a decision the page reads again at once; the live feed moves the counters of other tabs.
window.addEventListener('mb:decided', () => current.refresh().catch(() => undefined));
installReviewKeys();
route();
connect();
