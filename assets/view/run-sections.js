// @ts-check
// The run page's sections above the results: counters, review counters, money and rate, the cost table,
// failures by reason, what needs the reader, chains waiting. Each is drawn whole and put in place by id.
import { h, table, taskHref } from './dom.js';
import { count, duration, rate, stateLabel, time, tokens, tokensWithUnit } from './format.js';
import { lists } from './lists.js';

/** @typedef {import('./api-types').RunDetail} RunDetail */
/** @typedef {import('./api-types').RunHead} RunHead */

/** Always shown, even at 0: the states a reader looks for first. */
const ALWAYS = ['pending', 'running', 'done', 'failed'];

/**
 * @param {string} cls
 * @param {Record<string, string>} dataset
 * @param {number} value
 * @param {string} label
 */
const counter = (cls, dataset, value, label) =>
  h(`div.counter.${cls}`, { dataset }, h('span.n', {}, count(value)), h('span.l', {}, label));

/** @param {Pick<RunHead, 'tasks' | 'by_state'>} run */
export function counters(run) {
  const shown = lists().task_states.filter((s) => (run.by_state[s] ?? 0) > 0 || ALWAYS.includes(s));
  return h(
    'div.counters',
    { id: 'counters' },
    counter('total', { state: 'total' }, run.tasks, 'tasks'),
    shown.map((s) => counter(`s-${s}`, { state: s }, run.by_state[s] ?? 0, stateLabel(s))),
  );
}

/**
 * A run with reviewed tasks: how many await a decision, were approved, rejected, re-rolled.
 * @param {RunDetail['review']} review
 */
export function reviewCounters(review) {
  if (!review) return h('div', { id: 'review-counters', hidden: true });
  /**
   * @param {string} state
   * @param {number} value
   * @param {string} label
   */
  const n = (state, value, label) => counter(`rv-${state}`, { review: state }, value, label);
  return h(
    'div.counters.review-counters',
    { id: 'review-counters' },
    n('awaiting', review.awaiting, 'awaiting review'),
    n('waiting', review.waiting, 'wait for a review'),
    n('approved', review.approved, 'approved'),
    n('rejected', review.rejected, 'rejected'),
    n('rerolls', review.rerolls.asked, `re-rolls (${tokensWithUnit(review.rerolls.net)})`),
  );
}

/** Said instead of figures while a large run's cost table and series are first read (figures_ready). */
export const READING = 'figures are being read…';

/** @param {RunHead} run */
const progress = (run) => `${count(run.finished)}/${count(run.tasks)} finished`;

/** @param {RunDetail} d */
export function money(d) {
  const { run, finished_series: f } = d;
  const perMinute = f.rate_per_minute === null ? 'no rate yet' : `${rate(f.rate_per_minute)} tasks/min`;
  const eta = f.estimated_end
    ? `estimated end ${time(f.estimated_end)} UTC`
    : f.unfinished === 0
      ? 'all finished'
      : run.state === 'running'
        ? 'no estimate yet'
        : 'not running';
  if (!d.figures_ready) {
    return h(
      'p.money',
      { id: 'money', dataset: { figures: 'reading' } },
      `Spend: ${READING}`,
      h('br'),
      h('span', { id: 'rate' }, `${progress(run)} · active ${duration(run.active_ms)}`),
    );
  }
  return h(
    'p.money',
    { id: 'money' },
    `Net ${tokensWithUnit(run.net)} (charged ${tokensWithUnit(run.charged)}, refunded ${tokensWithUnit(run.refunded)}) · estimated ${tokensWithUnit(run.estimated)} · worst case ${tokensWithUnit(run.worst_case)}`,
    run.budget === null ? '' : ` · budget ${tokensWithUnit(run.budget)}`,
    h('br'),
    h('span', { id: 'rate' }, `${progress(run)} · ${perMinute} · ${eta} · active ${duration(run.active_ms)}`),
  );
}

/** @param {RunDetail} d */
export function models(d) {
  if (!d.figures_ready) {
    return h('section', { id: 'models' }, h('h2', {}, 'Cost by model'), h('p.muted.reading', {}, READING));
  }
  return h(
    'section',
    { id: 'models' },
    h('h2', {}, 'Cost by model'),
    table(
      ['model', 'tasks', 'done', 'estimated', 'charged', 'refunded', 'net'],
      d.models.map((m) => [
        m.model,
        count(m.tasks),
        count(m.done),
        tokens(m.estimated),
        tokens(m.charged),
        tokens(m.refunded),
        tokens(m.net),
      ]),
      { class: 'cost' },
    ),
  );
}

/**
 * @param {string} run
 * @param {RunDetail} d
 */
export function failures(run, d) {
  const body =
    d.failures.length === 0
      ? h('p.muted', {}, 'No failures.')
      : table(
          ['reason', 'count', 'tasks'],
          d.failures.map((f) => [
            h('span.reason', {}, f.reason),
            h('span.count', {}, count(f.count)),
            h(
              'span',
              {},
              f.tasks.map((t, i) => [i > 0 ? ', ' : '', h('a', { href: taskHref(run, t) }, t)]),
              f.count > f.tasks.length ? ' …' : '',
            ),
          ]),
          { class: 'failures' },
        );
  return h('section', { id: 'failures' }, h('h2', {}, 'Failures by reason'), body);
}

/** @param {RunDetail} d */
export function advice(d) {
  const parts = [];
  if (d.in_doubt.tasks > 0) {
    parts.push(
      h('p.advice.in-doubt', {}, d.in_doubt.advice),
      h(
        'p.advice',
        {},
        `--retry-in-doubt would cost about ${tokensWithUnit(d.in_doubt.retry_estimate)}, at most ${tokensWithUnit(d.in_doubt.retry_max)}.`,
      ),
    );
  }
  if (d.unfinished.advice) parts.push(h('p.advice', {}, d.unfinished.advice));
  const paid = Object.entries(d.paid_not_on_disk).filter(([, v]) => v.tasks > 0);
  if (paid.length > 0) {
    const list = paid.map(
      ([s, v]) => `${count(v.tasks)} ${s.replaceAll('_', ' ')} (${tokensWithUnit(v.tokens)})`,
    );
    parts.push(h('p.advice', {}, `Paid, not on disk: ${list.join(', ')}.`));
  }
  return h('section', { id: 'in-doubt' }, parts.length === 0 ? null : h('h2', {}, 'Needs you'), parts);
}

/**
 * @param {string} run
 * @param {RunDetail} d
 */
export function chains(run, d) {
  if (d.chains.length === 0) return h('section', { id: 'chains' });
  return h(
    'section',
    { id: 'chains' },
    h('h2', {}, 'Chains waiting'),
    table(
      ['task', 'state', 'waits for'],
      d.chains.map((c) => [
        h('a', { href: taskHref(run, c.task) }, c.task),
        stateLabel(c.state),
        // As `status` says it: `still: hero-mug (done, awaiting review)`.
        c.after.map((u, i) => [
          i > 0 ? ', ' : '',
          u.name === '' ? '' : `${u.name}: `,
          h('a', { href: taskHref(run, u.task) }, u.task),
          ` (${u.state === null ? 'not in the run' : stateLabel(u.state)}${u.review === undefined ? '' : `, ${u.review}`})`,
        ]),
      ]),
    ),
  );
}

/**
 * Said above the charts while the figures are first read; empty once they are in.
 * @param {RunDetail} d
 */
export function figuresNote(d) {
  return h('p.muted.reading', { id: 'figures-note' }, d.figures_ready ? null : `Charts: ${READING}`);
}

/**
 * How long ago `iso` was by the server's clock: `skew` is the server's time minus this browser's, so a
 * browser whose clock is off still reads the heartbeat's age right.
 * @param {string} iso
 * @param {number} skew
 */
export function ago(iso, skew) {
  return `${duration(Math.max(0, Date.now() + skew - Date.parse(iso)))} ago`;
}

/**
 * The server's time minus this browser's, from an answer's `now`.
 * @param {import('./api-types').WorkersAnswer} w
 */
export const skewOf = (w) => Date.parse(w.now) - Date.now();

/**
 * A start time as the charts' axis reads it: `14:34:05` on the server's day, `11-27 14:34` before.
 * @param {string} iso
 * @param {string} today
 */
const since = (iso, today) => {
  const shown = time(iso);
  return iso.startsWith(today) ? shown.slice(11) : shown.slice(5, 16);
};

/** @param {import('./api-types').WorkerRow} w */
const workerLabel = (w) => (w.state === 'lost' ? 'lost' : w.state === 'stopped' ? 'stopped' : 'working');

/**
 * The processes that drive the run, a lost one marked: host, since when, tasks in flight, submitted,
 * and how long ago its last heartbeat was (kept current by `tickAges`). Hidden when the run has none.
 * @param {import('./api-types').WorkersAnswer} answer
 * @param {number} skew
 */
export function workers(answer, skew) {
  const list = answer.workers;
  if (list.length === 0) return h('section', { id: 'workers', hidden: true });
  /** @param {string} state */
  const n = (state) => list.filter((w) => w.state === state).length;
  const today = answer.now.slice(0, 10);
  const rows = list.map((w) =>
    h(
      `tr.w-${w.state}`,
      { dataset: { worker: w.id, state: w.state } },
      h('td', {}, h('span.host', {}, w.host), h('br'), h('span.muted', {}, `pid ${w.pid}`)),
      h('td', {}, h(`span.worker-state.w-${w.state}`, {}, workerLabel(w))),
      h('td', {}, h('span.ago', { dataset: { at: w.heartbeat_at } }, ago(w.heartbeat_at, skew))),
      h('td.num', {}, count(w.in_flight)),
      h('td.num', {}, count(w.submitted)),
      h('td', {}, since(w.started_at, today)),
    ),
  );
  const headers = ['worker', 'state', 'last heartbeat', 'in flight', 'submitted', 'since (UTC)'];
  return h(
    'section',
    { id: 'workers' },
    h('h2', {}, 'Workers'),
    h(
      'p.muted',
      { id: 'workers-summary' },
      `${count(n('working'))} working · ${count(n('lost'))} lost · ${count(n('stopped'))} stopped`,
    ),
    h(
      'div.table-box',
      {},
      h(
        'table.workers',
        {},
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            headers.map((x) => h('th', { scope: 'col' }, x)),
          ),
        ),
        h('tbody', {}, rows),
      ),
    ),
  );
}

/**
 * The heartbeats' ages moved on by the clock alone (nothing read).
 * @param {number} skew
 */
export function tickAges(skew) {
  for (const el of document.querySelectorAll('#workers .ago')) {
    const at = el instanceof HTMLElement ? el.dataset['at'] : undefined;
    if (at !== undefined) el.textContent = ago(at, skew);
  }
}
