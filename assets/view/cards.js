// @ts-check
// One result card: thumbnails, players, an oc-maker sheet or songs with their lyrics, the prompt, the
// state and what it cost. The heading links to the task page (keyboard: Tab to it, Enter).
import { h, taskHref } from './dom.js';
import { stateLabel, tokensWithUnit } from './format.js';
import { reviewBadge, reviewControls } from './review.js';

/** @typedef {import('./api-types').TaskRow} TaskRow */
/** @typedef {import('./api-types').FileRow} FileRow */

/**
 * @param {FileRow} f
 * @param {string} alt
 */
function media(f, alt) {
  // Lazy and decoded off the main thread: a fast run's new results cost nothing until scrolled to.
  if (f.kind === 'image') return h('img.thumb', { src: f.url, alt, loading: 'lazy', decoding: 'async' });
  if (f.kind === 'video') return h('video.player', { src: f.url, controls: true, preload: 'metadata' });
  if (f.kind === 'audio') return h('audio.player', { src: f.url, controls: true, preload: 'none' });
  return h('a.file', { href: f.url }, f.name);
}

/** @param {unknown} value */
function sheet(value) {
  if (value === null || typeof value !== 'object') return null;
  return h(
    'dl.sheet',
    {},
    Object.entries(value).map(([k, v]) => [
      h('dt', {}, k),
      h('dd', {}, typeof v === 'string' ? v : JSON.stringify(v)),
    ]),
  );
}

/** @param {TaskRow['songs']} list */
function songs(list) {
  if (!Array.isArray(list) || list.length === 0) return null;
  return h(
    'div.songs',
    {},
    list.map((s) =>
      h(
        'details.song',
        {},
        h('summary', {}, s.title ?? 'untitled song'),
        h('pre.lyrics', {}, s.lyrics ?? ''),
      ),
    ),
  );
}

/** @param {Pick<TaskRow, 'text'>} t */
export function promptOf(t) {
  return t.text['prompt'] ?? t.text['text'] ?? t.text['lyrics'] ?? t.text['description'] ?? '';
}

/**
 * The state as a card says it: a task held for a person's review of its upstream names that upstream
 * ("waiting for still-4's review"), apart from the reviewed result itself (its badge: "awaiting review").
 * @param {Pick<TaskRow, 'state' | 'waits_for_review'>} t
 */
export function stateText(t) {
  const upstreams = t.waits_for_review ?? [];
  if (t.state !== 'awaiting_review' || upstreams.length === 0) return stateLabel(t.state);
  const names = upstreams.length > 2 ? `${upstreams.slice(0, 2).join(', ')} …` : upstreams.join(' and ');
  return `waiting for ${names}'s review`;
}

/**
 * @param {string} run
 * @param {TaskRow} t
 */
export function card(run, t) {
  const prompt = promptOf(t);
  return h(
    'article.card',
    {
      tabindex: -1,
      dataset: {
        task: t.id,
        state: t.state,
        model: t.model,
        ...(t.review
          ? { review: t.review.status, version: String(t.review.version), attempt: String(t.review.attempt) }
          : {}),
      },
    },
    h('h3.card-title', {}, h('a', { href: taskHref(run, t.id) }, t.id)),
    h(
      'div.media',
      {},
      t.files.map((f) => media(f, prompt || t.id)),
    ),
    sheet(t.sheet),
    songs(t.songs),
    prompt ? h('p.prompt', {}, prompt.length > 160 ? `${prompt.slice(0, 159)}…` : prompt) : null,
    t.error ? h('p.error', {}, t.error) : null,
    h(
      'p.meta',
      {},
      h(`span.state.s-${t.state}`, {}, stateText(t)),
      ` · ${t.model} · ${tokensWithUnit(t.net)} `,
      reviewBadge(t),
    ),
    reviewControls(run, t),
  );
}
