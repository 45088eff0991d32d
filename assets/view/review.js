// @ts-check
// Choosing results on the page: badges, approve / reject / re-roll buttons with a note, the keyboard
// (j/k or arrows to move, a approve, r reject, shift+R or e re-roll, x select) and decisions in bulk. A
// re-roll shows its price and what the budget leaves before anything is asked. Every decision carries
// the version the page was shown: one taken elsewhere meanwhile is refused and its reason shown. A
// decided card stays where it is, marked with what was decided (results.js keeps the order).
import { api } from './api.js';
import { h } from './dom.js';
import { count } from './format.js';

/** @typedef {{ id: string, version: number, attempt: number }} Target */
/** @typedef {Pick<import('./api-types').TaskRow, 'id' | 'state' | 'review'>} Reviewed */

/** @type {Record<string, string>} */
const LABEL = {
  awaiting: 'awaiting review',
  waiting: 'review: not ready',
  approved: 'approved',
  rejected: 'rejected',
};
/** @type {Record<string, string>} */
const PAST = { approve: 'approved', reject: 'rejected', reroll: 're-roll asked for' };
/** The task ids the reader selected with x or the checkboxes; kept across redraws of the grid. */
const selected = new Set();
/** @type {string | null} */
let currentId = null;
/** Set once the reader moved, selected or decided: from then on the grid keeps its order (results.js). */
let engagedFlag = false;

/** The reader works on the grid: its order must not change under them. */
export function engaged() {
  return engagedFlag || currentId !== null || selected.size > 0;
}

/** A new grid (another filter or order, asked by the reader): the order may be the server's again. */
export function disengage() {
  engagedFlag = false;
}

/** @param {{ review: { status: string } | null }} t */
export function reviewBadge(t) {
  if (!t.review) return null;
  const s = t.review.status;
  return h(`span.badge.rv-${s}`, { dataset: { review: s } }, LABEL[s] ?? s);
}

/**
 * @param {string} text
 * @param {boolean} [bad]
 */
function say(text, bad = false) {
  const el = document.getElementById('review-status');
  if (!el) return;
  el.textContent = text;
  el.dataset['kind'] = bad ? 'refused' : 'ok';
}

/**
 * The buttons and note of one reviewed task (a card or the task page).
 * @param {string} run
 * @param {Reviewed} t
 */
export function reviewControls(run, t) {
  const review = t.review;
  if (!review || t.state !== 'done') return null;
  const note = /** @type {HTMLInputElement} */ (
    h('input.note', { type: 'text', name: 'note', placeholder: 'note (optional)', maxlength: 2000 })
  );
  const target = { id: t.id, version: review.version, attempt: review.attempt };
  /**
   * @param {string} verdict
   * @param {string} text
   * @param {string} key
   */
  const button = (verdict, text, key) =>
    h(
      `button.decide.v-${verdict}`,
      {
        type: 'button',
        dataset: { verdict },
        title: `${text} (key ${key})`,
        onclick: () => decideTasks(run, [target], verdict, note.value),
      },
      text,
    );
  return h(
    'div.review',
    {},
    h(
      'label.select-box',
      {},
      h('input.select', {
        type: 'checkbox',
        'aria-label': `select ${t.id}`,
        checked: selected.has(t.id),
        onchange: (/** @type {Event} */ e) =>
          toggle(t.id, /** @type {HTMLInputElement} */ (e.target).checked),
      }),
    ),
    button('approve', 'Approve', 'a'),
    button('reject', 'Reject', 'r'),
    button('reroll', 'Re-roll', 'shift+R'),
    note,
  );
}

/** @returns {HTMLElement[]} */
function cards() {
  return [...document.querySelectorAll('#grid .card')].map((el) => /** @type {HTMLElement} */ (el));
}

/**
 * @param {string} id
 * @param {boolean} on
 */
function toggle(id, on) {
  if (on) selected.add(id);
  else selected.delete(id);
  for (const el of cards()) {
    el.classList.toggle('selected', selected.has(el.dataset['task']));
    const box = /** @type {HTMLInputElement | null} */ (el.querySelector('input.select'));
    if (box) box.checked = selected.has(el.dataset['task']);
  }
  const bar = document.getElementById('bulk');
  if (bar) bar.replaceWith(bulkBar(bar.dataset['run'] ?? ''));
}

/**
 * Marks a redrawn card as the current and selected one, as the reader left it.
 * @param {HTMLElement} el
 */
export function markCard(el) {
  el.classList.toggle('selected', selected.has(el.dataset['task']));
  el.classList.toggle('current', el.dataset['task'] === currentId);
  return el;
}

/**
 * Above the grid: how many are selected and the three decisions for all of them.
 * @param {string} run
 */
export function bulkBar(run) {
  const n = selected.size;
  const note = /** @type {HTMLInputElement} */ (
    h('input.note', { type: 'text', name: 'bulk-note', placeholder: 'note (optional)' })
  );
  /**
   * @param {string} verdict
   * @param {string} text
   */
  const act = (verdict, text) =>
    h(
      `button.decide.v-${verdict}`,
      { type: 'button', disabled: n === 0, onclick: () => decideSelected(run, verdict, note.value) },
      text,
    );
  return h(
    'div.bulk',
    { id: 'bulk', dataset: { run, count: String(n) } },
    h('span', { id: 'selected-count' }, `${count(n)} selected`),
    act('approve', 'Approve selected'),
    act('reject', 'Reject selected'),
    act('reroll', 'Re-roll selected'),
    note,
    h('button', { type: 'button', disabled: n === 0, onclick: () => clearSelection() }, 'Clear selection'),
  );
}

function clearSelection() {
  selected.clear();
  toggle('', false);
}

/**
 * @param {HTMLElement} el
 * @returns {Target | null}
 */
function targetOf(el) {
  const { task, version, attempt } = el.dataset;
  if (task === undefined || version === undefined) return null;
  return { id: task, version: Number(version), attempt: Number(attempt ?? 1) };
}

function selectedTargets() {
  /** @type {Target[]} */
  const out = [];
  for (const el of cards()) {
    const t = selected.has(el.dataset['task']) ? targetOf(el) : null;
    if (t) out.push(t);
  }
  return out;
}

/**
 * @param {string} run
 * @param {string} verdict
 * @param {string} note
 */
function decideSelected(run, verdict, note) {
  const targets = selectedTargets();
  if (targets.length === 0) return say('Select results first (x, or their checkboxes).', true);
  return decideTasks(run, targets, verdict, note);
}

/**
 * Where the earlier results go: `<run folder>/<task>/attempt-<n>/`, the folders the re-roll keeps them in.
 * @param {Target[]} targets
 */
function keptIn(targets) {
  const folder = document.querySelector('[data-run-folder]')?.getAttribute('data-run-folder');
  const paths = targets.map((t) => `${folder ? `${folder}/` : ''}${t.id}/attempt-${t.attempt}/`);
  const shown = paths.length > 3 ? [...paths.slice(0, 3), `and ${count(paths.length - 3)} more`] : paths;
  return `${targets.length === 1 ? 'the earlier result is' : 'the earlier results are'} kept in ${shown.join(', ')}`;
}

/**
 * The price of a re-roll and what the budget leaves, in a dialog: Enter confirms, Escape cancels.
 * @param {string} run
 * @param {Target[]} targets
 * @returns {Promise<boolean>}
 */
async function confirmReroll(run, targets) {
  const p = await api.rerollPrice(
    run,
    targets.map((t) => t.id),
  );
  // The server words it (src/review/): the re-roll's own price, its downstreams priced again, and what
  // the budget leaves after it, the same words as the CLI's prompt.
  const text = p.text;
  return new Promise((resolve) => {
    /** @param {boolean} ok */
    const done = (ok) => {
      dialog.close();
      dialog.remove();
      resolve(ok);
    };
    const yes = h(
      'button.v-reroll',
      { type: 'button', id: 'reroll-confirm', onclick: () => done(true) },
      'Re-roll',
    );
    const cancel = h('button', { type: 'button', id: 'reroll-cancel', onclick: () => done(false) }, 'Cancel');
    const dialog = /** @type {HTMLDialogElement} */ (
      h(
        'dialog.price',
        { id: 'reroll-dialog', 'aria-labelledby': 'reroll-price' },
        h('p', { id: 'reroll-price', dataset: { total: String(p.total), fits: String(p.fits) } }, text),
        !p.fits
          ? h(
              'p.error',
              {},
              'Over the budget: nothing will be sent; raise budget in the manifest to re-roll.',
            )
          : p.nextRunRefuses
            ? h(
                'p.error',
                { id: 'reroll-refuses' },
                'After this re-roll the next run would refuse to start: see above.',
              )
            : null,
        p.fits
          ? h('p.muted', { id: 'reroll-kept' }, `A re-roll is a second charge: ${keptIn(targets)}.`)
          : null,
        h('div.dialog-buttons', {}, p.fits ? yes : null, cancel),
      )
    );
    dialog.addEventListener('cancel', (e) => {
      e.preventDefault();
      done(false);
    });
    document.body.append(dialog);
    dialog.showModal();
    (p.fits ? yes : cancel).focus();
  });
}

/**
 * A card decided here: marked at once with what was decided, where it is, and no longer decidable (its
 * next version comes with the live feed); the grid then keeps it in its place.
 * @param {string} id
 * @param {string} verdict
 */
function markDecided(id, verdict) {
  for (const el of cards()) {
    if (el.dataset['task'] !== id) continue;
    el.dataset['key'] = 'decided';
    el.dataset['review'] = PAST[verdict] ?? verdict;
    delete el.dataset['version'];
    el.querySelector('.badge')?.replaceWith(h('span.badge.rv-decided', {}, PAST[verdict] ?? verdict));
    el.querySelector('.review')?.remove();
  }
}

/**
 * Sends one decision for these targets; says what happened; the live feed redraws.
 * @param {string} run
 * @param {Target[]} targets
 * @param {string} verdict
 * @param {string} note
 */
export async function decideTasks(run, targets, verdict, note) {
  engagedFlag = true;
  const ids = targets.map((t) => t.id);
  try {
    if (verdict === 'reroll' && !(await confirmReroll(run, targets)))
      return say('Re-roll cancelled: nothing was sent.');
    const expectedVersions = Object.fromEntries(targets.map((t) => [t.id, t.version]));
    const answer = await api.decide(run, { taskIds: ids, verdict, note, expectedVersions });
    const done = answer.outcomes.filter((o) => o.ok);
    const refused = answer.outcomes.filter((o) => !o.ok);
    for (const o of done) {
      selected.delete(o.task);
      markDecided(o.task, verdict);
    }
    /** @type {string[]} */
    const parts = [];
    if (done.length > 0) parts.push(`${done.map((o) => o.task).join(', ')}: ${PAST[verdict]}`);
    for (const o of refused) parts.push(`${o.task}: refused: ${o.reason}`);
    say(parts.join(' · '), refused.length > 0);
  } catch (error) {
    say(`Refused: ${error instanceof Error ? error.message : String(error)}`, true);
  }
  window.dispatchEvent(new Event('mb:decided'));
}

// ---- the keyboard -----------------------------------------------------------------------------------

/** @param {number} step */
function move(step) {
  const list = cards();
  if (list.length === 0) return;
  const at = list.findIndex((el) => el.dataset['task'] === currentId);
  const next = list[Math.max(0, Math.min(list.length - 1, at < 0 ? 0 : at + step))];
  if (!next) return;
  currentId = next.dataset['task'] ?? null;
  for (const el of list) markCard(el);
  next.focus({ preventScroll: true });
  next.scrollIntoView({ block: 'nearest' });
}

/** The card under the cursor, or the task page's task. */
function currentEl() {
  return (
    cards().find((c) => c.dataset['task'] === currentId) ??
    /** @type {HTMLElement | null} */ (document.querySelector('#task[data-version]'))
  );
}

/** What a/r/R act on: the selection in bulk, else the current card, else the task page's task. */
function keyTargets() {
  if (selected.size > 0) return selectedTargets();
  const el = currentEl();
  const t = el ? targetOf(el) : null;
  return t ? [t] : [];
}

/** @param {Target[]} targets */
function noteFor(targets) {
  if (targets.length === 0) return '';
  const box = selected.size > 0 ? document.querySelector('#bulk') : currentEl();
  const note = box?.querySelector('input.note');
  return note instanceof HTMLInputElement ? note.value : '';
}

/** @type {Record<string, number>} */
const MOVES = { j: 1, ArrowDown: 1, ArrowRight: 1, k: -1, ArrowUp: -1, ArrowLeft: -1 };
/** @type {Record<string, string>} */
const VERDICTS = { a: 'approve', r: 'reject', R: 'reroll', e: 'reroll' };

/** @param {KeyboardEvent} e */
function onKey(e) {
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.target instanceof HTMLElement && e.target.closest('input, textarea, select, dialog')) return;
  const run = /** @type {HTMLElement | null} */ (document.querySelector('[data-review-run]'))?.dataset[
    'reviewRun'
  ];
  if (!run) return;
  const step = MOVES[e.key];
  if (step !== undefined && cards().length > 0) {
    e.preventDefault();
    return move(step);
  }
  if (e.key === 'x' && currentId !== null) {
    e.preventDefault();
    return toggle(currentId, !selected.has(currentId));
  }
  const verdict = VERDICTS[e.key];
  if (verdict === undefined) return;
  e.preventDefault();
  const targets = keyTargets();
  if (targets.length === 0)
    return say('Nothing to decide: move to a result awaiting review (j/k) first.', true);
  decideTasks(run, targets, verdict, noteFor(targets));
}

let installed = false;
export function installReviewKeys() {
  if (installed) return;
  installed = true;
  document.addEventListener('keydown', onKey);
}
