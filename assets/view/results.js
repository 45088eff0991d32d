// @ts-check
// The run page's results: the filters, the bar that decides for the selected cards, the keys and the
// grid. Cards are kept by task id across refreshes, so a playing video or the focused card survives an
// update. The order is the server's until the reader works on the grid (moves, selects, decides): from
// then on a refresh only redraws cards where they are, and results new to the grid wait behind a
// "show" button, so a decision never moves the card under the cursor nor any card before it. The order
// changes again when the reader asks (that button, a filter, the order, a reload).
import { api } from './api.js';
import { card } from './cards.js';
import { h } from './dom.js';
import { count, stateLabel } from './format.js';
import { lists } from './lists.js';
import { bulkBar, disengage, engaged, markCard } from './review.js';

/** @typedef {import('./api-types').TaskRow} TaskRow */
/** @typedef {import('./api-types').RunDetail} RunDetail */
/** @typedef {{ model: string, state: string, q: string, order: string, review: string }} Query */

const PAGE = 48;
/** @type {Record<string, string>} How the served orders read (an order the server adds shows by its name). */
const ORDER_LABELS = { newest: 'newest first', id: 'by task id' };

/** @param {TaskRow} t */
const keyOf = (t) => `${t.state}|${t.files.length}|${t.net}|${t.review?.status}|${t.review?.version}`;

/**
 * @param {string} run
 * @param {() => boolean} isCurrent
 */
export function resultsGrid(run, isCurrent) {
  const grid = h('div.grid', { id: 'grid', 'aria-live': 'polite' });
  const more = h('button.more', { type: 'button', hidden: true }, 'More results');
  const news = h('button.news', { type: 'button', id: 'grid-news', hidden: true });
  /** @type {Map<string, HTMLElement>} */
  const byId = new Map();
  /** @type {string | null} */
  let cursor = null;
  /** @type {Query} */
  let query = { model: '', state: '', q: '', order: 'newest', review: '' };

  /** @param {TaskRow} t */
  const cardOf = (t) => {
    const old = byId.get(t.id);
    if (old && old.dataset['key'] === keyOf(t)) return markCard(old);
    const el = card(run, t);
    el.dataset['key'] = keyOf(t);
    byId.set(t.id, el);
    if (old?.isConnected) {
      const focused = old.contains(document.activeElement);
      old.replaceWith(el);
      if (focused) el.focus({ preventScroll: true });
    }
    return markCard(el);
  };

  /**
   * The reader works on the grid: shown cards are redrawn where they are; results new to the grid, and
   * the shown ones the server now puts elsewhere, are counted on the button that shows them in order.
   * @param {TaskRow[]} tasks
   */
  const keepOrder = (tasks) => {
    const shown = tasks.filter((t) => byId.get(t.id)?.isConnected);
    for (const t of shown) cardOf(t);
    const listed = new Set(shown.map((t) => t.id));
    const here = [...grid.children].map((el) => /** @type {HTMLElement} */ (el).dataset['task']);
    const inGrid = here.filter((id) => id !== undefined && listed.has(id));
    const moved = shown.filter((t, i) => inGrid[i] !== t.id).length;
    const waiting = tasks.length - shown.length + moved;
    news.hidden = waiting === 0;
    news.textContent = `${count(waiting)} new or moved result(s): show them in order`;
  };

  /**
   * @param {TaskRow[]} tasks
   * @param {'append' | 'live' | 'new'} how
   */
  const place = (tasks, how) => {
    if (how === 'live' && engaged()) return keepOrder(tasks);
    const els = tasks.map(cardOf);
    news.hidden = true;
    if (how === 'append') grid.append(...els.filter((el) => el.parentElement !== grid));
    // The same cards in the same order: nothing is touched (an image or a playing video stays as is).
    else if (els.length !== grid.children.length || els.some((el, i) => grid.children[i] !== el)) {
      grid.replaceChildren(...els);
    }
    grid.dataset['count'] = String(grid.children.length);
  };

  // Answers may come back out of order (a slow filter's answer after the next filter's): an answer is
  // shown only while nothing asked later has replaced it, so the grid never goes back to an older query.
  let asked = 0;
  let shown = 0;
  let since = 0;
  /** @param {'append' | 'live' | 'new'} how */
  const load = async (how) => {
    const mine = ++asked;
    if (how === 'new') since = mine;
    const page = await api.tasks(run, { ...query, limit: PAGE, cursor: how === 'append' ? cursor : null });
    if (!isCurrent() || mine < since) return;
    if (how !== 'append') {
      if (mine < shown) return;
      shown = mine;
    }
    if (how !== 'live' || !engaged()) {
      cursor = page.next_cursor;
      more.hidden = cursor === null;
    }
    place(page.tasks, how);
  };
  more.addEventListener('click', () => load('append'));
  news.addEventListener('click', () => {
    disengage();
    return load('new');
  });
  return {
    grid,
    more,
    news,
    get query() {
      return query;
    },
    /**
     * @param {keyof Query} name
     * @param {string} value
     */
    set(name, value) {
      query = { ...query, [name]: value };
      disengage();
      return load('new');
    },
    /** Live: the first page again, unless the reader has paged on (then new results wait for them). */
    refresh: () => (grid.children.length <= PAGE ? load('live') : Promise.resolve()),
    load,
  };
}

/** @typedef {ReturnType<typeof resultsGrid>} Results */

/**
 * @param {RunDetail} d
 * @param {Query} state
 * @param {(name: keyof Query, value: string) => void} onChange
 */
function filters(d, state, onChange) {
  /**
   * @param {keyof Query} name
   * @param {string} label
   * @param {string[][]} options
   * @param {string} value
   */
  const select = (name, label, options, value) =>
    h(
      'label',
      {},
      `${label} `,
      h(
        'select',
        {
          name,
          onchange: (/** @type {Event} */ e) =>
            onChange(name, /** @type {HTMLSelectElement} */ (e.target).value),
        },
        options.map(([v, t]) => h('option', { value: v, selected: v === value }, t)),
      ),
    );
  const modelsList = [['', 'all'], ...d.models.map((m) => [m.model, m.model])];
  const statesList = [['', 'all'], ...lists().task_states.map((s) => [s, stateLabel(s)])];
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  return h(
    'form.filters',
    { id: 'filters', role: 'search', onsubmit: (/** @type {Event} */ e) => e.preventDefault() },
    select('model', 'Model', modelsList, state.model),
    select('state', 'State', statesList, state.state),
    d.review
      ? select(
          'review',
          'Review',
          [
            ['', 'all'],
            ['awaiting', 'awaiting review'],
          ],
          state.review,
        )
      : null,
    select(
      'order',
      'Order',
      lists().orders.map((o) => [o, ORDER_LABELS[o] ?? o]),
      state.order,
    ),
    h(
      'label',
      {},
      'Text ',
      h('input', {
        type: 'search',
        name: 'q',
        value: state.q,
        placeholder: 'task id, prompt, error',
        oninput: (/** @type {Event} */ e) => {
          clearTimeout(timer);
          const value = /** @type {HTMLInputElement} */ (e.target).value;
          timer = setTimeout(() => onChange('q', value), 250);
        },
      }),
    ),
  );
}

/**
 * The results: filters, the bar that decides for the selected cards, the keys, the grid.
 * @param {string} run
 * @param {RunDetail} d
 * @param {Results} results
 */
export function resultsSection(run, d, results) {
  return h(
    'section',
    { id: 'results', dataset: { reviewRun: run, runFolder: d.run.folder } },
    h('h2', {}, 'Results'),
    filters(d, results.query, (n, v) => results.set(n, v)),
    d.review ? bulkBar(run) : null,
    d.review
      ? h(
          'p.muted.keys',
          {},
          'Keys: j/k or arrows move · a approve · r reject · shift+R or e re-roll · x select (then a, r or R decide for the selection)',
        )
      : null,
    results.news,
    results.grid,
    results.more,
  );
}
