// One result card: thumbnails, players, an oc-maker sheet or songs with their lyrics, the prompt, the
// state and what it cost. The heading links to the task page (keyboard: Tab to it, Enter).
import { h, taskHref, tokens } from './dom.js';
import { reviewBadge, reviewControls } from './review.js';

function media(f, alt) {
  // Lazy and decoded off the main thread: a fast run's new results cost nothing until scrolled to.
  if (f.kind === 'image') return h('img.thumb', { src: f.url, alt, loading: 'lazy', decoding: 'async' });
  if (f.kind === 'video') return h('video.player', { src: f.url, controls: true, preload: 'metadata' });
  if (f.kind === 'audio') return h('audio.player', { src: f.url, controls: true, preload: 'none' });
  return h('a.file', { href: f.url }, f.name);
}

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

export function promptOf(t) {
  return t.text.prompt ?? t.text.text ?? t.text.lyrics ?? t.text.description ?? '';
}

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
        ...(t.review ? { review: t.review.status, version: String(t.review.version) } : {}),
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
      h(`span.state.s-${t.state}`, {}, t.state.replace('_', ' ')),
      ` · ${t.model} · ${tokens(t.net)} tokens `,
      reviewBadge(t),
    ),
    reviewControls(run, t),
  );
}
