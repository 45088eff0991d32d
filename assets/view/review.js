// Choosing results on the page (issue 25): badges, approve / reject / re-roll buttons with a note, the
// keyboard (j/k or arrows to move, a approve, r reject, shift+R or e re-roll, x select) and decisions in
// bulk. A re-roll shows its price and what the budget leaves before anything is asked. Every decision
// carries the version the page was shown: one taken elsewhere meanwhile is refused and its reason shown.
import { api } from './api.js';
import { h } from './dom.js';

const LABEL = {
  awaiting: 'awaiting review',
  waiting: 'review: not ready',
  approved: 'approved',
  rejected: 'rejected',
};
const PAST = { approve: 'approved', reject: 'rejected', reroll: 're-roll asked for' };
/** The task ids the reader selected with x or the checkboxes; kept across redraws of the grid. */
const selected = new Set();
let currentId = null;

export function reviewBadge(t) {
  if (!t.review) return null;
  const s = t.review.status;
  return h(`span.badge.rv-${s}`, { dataset: { review: s } }, LABEL[s] ?? s);
}

function say(text, bad = false) {
  const el = document.getElementById('review-status');
  if (!el) return;
  el.textContent = text;
  el.dataset.kind = bad ? 'refused' : 'ok';
}

/** The buttons and note of one reviewed task (a card or the task page). */
export function reviewControls(run, t) {
  if (!t.review || t.state !== 'done') return null;
  const note = h('input.note', {
    type: 'text',
    name: 'note',
    placeholder: 'note (optional)',
    maxlength: 2000,
  });
  const button = (verdict, text, key) =>
    h(
      `button.decide.v-${verdict}`,
      {
        type: 'button',
        dataset: { verdict },
        title: `${text} (key ${key})`,
        onclick: () => decideTasks(run, [target(t)], verdict, note.value),
      },
      text,
    );
  return h(
    'div.review',
    {},
    h('input.select', {
      type: 'checkbox',
      'aria-label': `select ${t.id}`,
      checked: selected.has(t.id),
      onchange: (e) => toggle(t.id, e.target.checked),
    }),
    button('approve', 'Approve', 'a'),
    button('reject', 'Reject', 'r'),
    button('reroll', 'Re-roll', 'shift+R'),
    note,
  );
}

function target(t) {
  return { id: t.id, version: t.review.version };
}

function toggle(id, on) {
  if (on) selected.add(id);
  else selected.delete(id);
  for (const el of document.querySelectorAll('#grid .card')) {
    el.classList.toggle('selected', selected.has(el.dataset.task));
    const box = el.querySelector('input.select');
    if (box) box.checked = selected.has(el.dataset.task);
  }
  const bar = document.getElementById('bulk');
  if (bar) bar.replaceWith(bulkBar(bar.dataset.run));
}

/** Marks a redrawn card as the current and selected one, as the reader left it. */
export function markCard(el) {
  el.classList.toggle('selected', selected.has(el.dataset.task));
  el.classList.toggle('current', el.dataset.task === currentId);
  return el;
}

/** Above the grid: how many are selected and the three decisions for all of them. */
export function bulkBar(run) {
  const n = selected.size;
  const note = h('input.note', { type: 'text', name: 'bulk-note', placeholder: 'note (optional)' });
  const act = (verdict, text) =>
    h(
      `button.decide.v-${verdict}`,
      { type: 'button', disabled: n === 0, onclick: () => decideSelected(run, verdict, note.value) },
      text,
    );
  return h(
    'div.bulk',
    { id: 'bulk', dataset: { run, count: String(n) } },
    h('span', { id: 'selected-count' }, `${n} selected`),
    act('approve', 'Approve selected'),
    act('reject', 'Reject selected'),
    act('reroll', 'Re-roll selected'),
    note,
    h('button', { type: 'button', disabled: n === 0, onclick: () => toggleAll(false) }, 'Clear selection'),
  );
}

function toggleAll(on) {
  if (!on) selected.clear();
  toggle('', false);
}

function selectedTargets() {
  const out = [];
  for (const el of document.querySelectorAll('#grid .card')) {
    if (selected.has(el.dataset.task) && el.dataset.version !== undefined) {
      out.push({ id: el.dataset.task, version: Number(el.dataset.version) });
    }
  }
  return out;
}

function decideSelected(run, verdict, note) {
  const targets = selectedTargets();
  if (targets.length === 0) return say('Select results first (x, or their checkboxes).', true);
  return decideTasks(run, targets, verdict, note);
}

/** The price of a re-roll and what the budget leaves, in a dialog: Enter confirms, Escape cancels. */
async function confirmReroll(run, ids) {
  const p = await api.rerollPrice(run, ids);
  // The server words it (src/review/): the re-roll's own price, its downstreams priced again, and what
  // the budget leaves after it, the same words as the CLI's prompt.
  const text = p.text;
  return new Promise((resolve) => {
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
    const dialog = h(
      'dialog.price',
      { id: 'reroll-dialog', 'aria-labelledby': 'reroll-price' },
      h('p', { id: 'reroll-price', dataset: { total: String(p.total), fits: String(p.fits) } }, text),
      !p.fits
        ? h('p.error', {}, 'Over the budget: nothing will be sent; raise budget in the manifest to re-roll.')
        : p.nextRunRefuses
          ? h(
              'p.error',
              { id: 'reroll-refuses' },
              'After this re-roll the next run would refuse to start: see above.',
            )
          : h('p.muted', {}, 'A re-roll is a second charge: the earlier result is kept in attempt-<n>/.'),
      h(
        'div',
        {},
        p.fits ? yes : null,
        h('button', { type: 'button', id: 'reroll-cancel', onclick: () => done(false) }, 'Cancel'),
      ),
    );
    dialog.addEventListener('cancel', (e) => {
      e.preventDefault();
      done(false);
    });
    document.body.append(dialog);
    dialog.showModal();
    (p.fits ? yes : dialog.querySelector('#reroll-cancel')).focus();
  });
}

/** Sends one decision for these targets ({id, version}); says what happened; the live feed redraws. */
export async function decideTasks(run, targets, verdict, note) {
  const ids = targets.map((t) => t.id);
  try {
    if (verdict === 'reroll' && !(await confirmReroll(run, ids)))
      return say('Re-roll cancelled: nothing was sent.');
    const expectedVersions = Object.fromEntries(targets.map((t) => [t.id, t.version]));
    const answer = await api.decide(run, { taskIds: ids, verdict, note, expectedVersions });
    const done = answer.outcomes.filter((o) => o.ok);
    const refused = answer.outcomes.filter((o) => !o.ok);
    for (const o of done) selected.delete(o.task);
    const parts = [];
    if (done.length > 0) parts.push(`${done.map((o) => o.task).join(', ')}: ${PAST[verdict]}`);
    for (const o of refused) parts.push(`${o.task}: refused: ${o.reason}`);
    say(parts.join(' · '), refused.length > 0);
  } catch (error) {
    say(`Refused: ${error.message ?? error}`, true);
  }
  window.dispatchEvent(new Event('mb:decided'));
}

// ---- the keyboard -----------------------------------------------------------------------------------

function cards() {
  return [...document.querySelectorAll('#grid .card')];
}

function move(step) {
  const list = cards();
  if (list.length === 0) return;
  const at = list.findIndex((el) => el.dataset.task === currentId);
  const next = list[Math.max(0, Math.min(list.length - 1, at < 0 ? 0 : at + step))];
  currentId = next.dataset.task;
  for (const el of list) markCard(el);
  next.focus({ preventScroll: true });
  next.scrollIntoView({ block: 'nearest' });
}

/** What a/r/R act on: the selection in bulk, else the current card, else the task page's task. */
function keyTargets() {
  if (selected.size > 0) return selectedTargets();
  const el =
    cards().find((c) => c.dataset.task === currentId) ?? document.querySelector('#task[data-version]');
  if (!el || el.dataset.version === undefined) return [];
  return [{ id: el.dataset.task, version: Number(el.dataset.version) }];
}

function noteFor(targets) {
  const where =
    selected.size > 0
      ? document.querySelector('#bulk input.note')
      : (cards().find((c) => c.dataset.task === currentId) ?? document.querySelector('#task'))?.querySelector(
          'input.note',
        );
  return targets.length > 0 ? (where?.value ?? '') : '';
}

function onKey(e) {
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.target instanceof HTMLElement && e.target.closest('input, textarea, select, dialog')) return;
  const run = document.querySelector('[data-review-run]')?.dataset.reviewRun;
  if (!run) return;
  const keys = { j: 1, ArrowDown: 1, ArrowRight: 1, k: -1, ArrowUp: -1, ArrowLeft: -1 };
  if (keys[e.key] !== undefined && cards().length > 0) {
    e.preventDefault();
    return move(keys[e.key]);
  }
  if (e.key === 'x' && currentId !== null) {
    e.preventDefault();
    return toggle(currentId, !selected.has(currentId));
  }
  const verdict =
    e.key === 'a' ? 'approve' : e.key === 'r' ? 'reject' : e.key === 'R' || e.key === 'e' ? 'reroll' : null;
  if (verdict === null) return;
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
