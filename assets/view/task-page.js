// @ts-check
// A task's page: its state and review, the media, the figures, decisions, the request as sent,
// attempts, ledger, files, the job record, upstreams and downstreams. Redrawn only when it moved.
import { api } from './api.js';
import { card } from './cards.js';
import { always, h, replace, runHref, table, taskHref } from './dom.js';
import { bytes, count, stateLabel, time, tokens, tokensWithUnit } from './format.js';
import { reviewBadge, reviewControls } from './review.js';

/** @typedef {import('./api-types').TaskDetail} TaskDetail */
/** @typedef {import('./api-types').Neighbour} Neighbour */
/** @typedef {import('./dom.js').Child} Child */

/** @param {Array<[string, Child]>} pairs */
function kv(pairs) {
  return h(
    'dl.kv',
    {},
    pairs.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v ?? '–')]),
  );
}

/**
 * @param {string} run
 * @param {Neighbour[]} list
 */
function links(run, list) {
  if (list.length === 0) return h('p.muted', {}, 'none');
  return h(
    'ul',
    {},
    list.map((u) =>
      h(
        'li',
        {},
        h('a', { href: taskHref(run, u.task) }, u.task),
        ` ${u.name ? `(${u.name}) ` : ''}· ${u.state === null ? 'not in the run' : stateLabel(u.state)}`,
      ),
    ),
  );
}

/**
 * Every decision on a reviewed task, oldest first.
 * @param {TaskDetail['review']} review
 */
function decisions(review) {
  if (!review) return null;
  return [
    h('h2', {}, 'Decisions'),
    table(
      ['verdict', 'attempt', 'note', 'by', 'at'],
      review.decisions.map((x) => [x.verdict, x.attempt, x.note ?? '', x.by, time(x.at)]),
      { id: 'decisions' },
    ),
  ];
}

/**
 * The state as the task page says it: a task held for a person's review names the upstream it waits for.
 * @param {TaskDetail} d
 */
function stateText(d) {
  if (d.task.state !== 'awaiting_review') return stateLabel(d.task.state);
  const waiting = d.upstreams.filter((u) => u.state === 'done').map((u) => u.task);
  return waiting.length === 0 ? stateLabel(d.task.state) : `waiting for ${waiting.join(' and ')}'s review`;
}

/**
 * The crumbs, the title with the state and the review badge, the error, the decision buttons.
 * @param {string} run
 * @param {TaskDetail} d
 */
function taskHead(run, d) {
  const t = d.task;
  return [
    h(
      'nav.crumbs',
      {},
      h('a', { href: '#/' }, 'Runs'),
      ' / ',
      h('a', { href: runHref(run) }, run),
      ' / ',
      h('span.task-id', {}, t.id),
    ),
    h(
      'h1',
      {},
      h('span.task-id', {}, t.id),
      ' ',
      h(`span.state.s-${t.state}`, { id: 'task-state' }, stateText(d)),
      ' ',
      reviewBadge({ review: d.review }),
    ),
    t.error ? h('p.error', {}, t.error) : null,
    d.review ? reviewControls(run, { id: t.id, state: t.state, review: d.review }) : null,
  ];
}

/**
 * @param {string} run
 * @param {TaskDetail} d
 */
function taskBody(run, d) {
  const t = d.task;
  const review = d.review;
  const reviewable = review && t.state === 'done';
  const shown = card(run, { ...t, net: 0, files: d.files, text: {}, review: null });
  return h(
    'div',
    {
      id: 'task',
      dataset: {
        reviewRun: run,
        task: t.id,
        ...(reviewable ? { version: String(review.version), attempt: String(review.attempt) } : {}),
      },
    },
    taskHead(run, d),
    h('div.media.big', {}, shown.querySelector('.media')),
    kv([
      ['model', t.model],
      ['endpoint', t.endpoint],
      ['job', t.img_uuid],
      ['job status', t.job_status],
      [
        'estimate',
        `${tokensWithUnit(t.estimate.tokens)} (${tokens(t.estimate.min)}–${tokens(t.estimate.max)})`,
      ],
      ['cost', tokensWithUnit(t.cost)],
      ['refunded', tokensWithUnit(t.refunded)],
      ['submitted', time(t.submitted_at)],
      ['finished', time(t.finished_at)],
      ['job duration', t.job_duration === null ? null : `${count(t.job_duration)} s`],
      ['polls', count(t.polls)],
    ]),
    decisions(review),
    h('h2', {}, 'Request as sent'),
    h('pre.json', { id: 'request' }, JSON.stringify(d.request, null, 2)),
    h('h2', {}, 'Attempts'),
    table(
      ['#', 'sent', 'answered', 'outcome', 'HTTP', 'message'],
      d.attempts.map((a) => [
        a.attempt,
        time(a.sent_at),
        time(a.answered_at),
        a.outcome ?? 'awaiting',
        a.http_status ?? '–',
        a.message ?? '',
      ]),
    ),
    h('h2', {}, 'Ledger'),
    table(
      ['kind', 'tokens', 'at', 'job'],
      d.ledger.map((l) => [l.kind, tokens(l.tokens), time(l.at), l.img_uuid]),
    ),
    h('h2', {}, 'Files'),
    table(
      ['#', 'kind', 'name', 'size'],
      d.files.map((f) => [f.index, f.kind, h('a', { href: f.url }, f.name), bytes(f.bytes)]),
    ),
    h('h2', {}, 'Job record'),
    table(
      ['status', 'at', 'source'],
      d.job.events.map((e) => [e.status, time(e.at), e.source]),
    ),
    d.job.record ? h('pre.json', {}, JSON.stringify(d.job.record, null, 2)) : null,
    h('h2', {}, 'Upstreams'),
    links(run, d.upstreams),
    h('h2', {}, 'Downstreams'),
    links(run, d.downstreams),
  );
}

/**
 * @param {HTMLElement} main
 * @param {string} run
 * @param {string} task
 * @param {() => boolean} [isCurrent]
 */
export async function taskPage(main, run, task, isCurrent = always) {
  let d = await api.task(run, task);
  if (!isCurrent()) return null;
  main.replaceChildren(taskBody(run, d));
  main.dataset['ready'] = 'task';
  return {
    onRun() {},
    async refresh() {
      const next = await api.task(run, task);
      if (!isCurrent()) return;
      // Redrawn only when it moved, so a playing video is not restarted by another task's change.
      const same =
        next.review?.version === d.review?.version &&
        next.task.state === d.task.state &&
        next.ledger.length === d.ledger.length &&
        next.job.events.length === d.job.events.length;
      if (same) return;
      d = next;
      replace('task', taskBody(run, next));
    },
  };
}
