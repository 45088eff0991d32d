// @ts-check
// The runs list: every run in the state file, newest first, with its progress and spend.
import { api } from './api.js';
import { always, h, replace, runHref, table } from './dom.js';
import { count, duration, time, tokens, tokensWithUnit } from './format.js';

/**
 * @param {HTMLElement} main
 * @param {() => boolean} [isCurrent]
 */
export async function runsPage(main, isCurrent = always) {
  const render = async () => {
    const { runs } = await api.runs();
    if (!isCurrent()) return;
    const rows = runs.map((r) => [
      h('a', { href: runHref(r.id) }, r.id),
      // With why it stopped, as `status` lists it: `interrupted (review)`.
      h(`span.state.r-${r.state}`, {}, r.stopped ? `${r.state} (${r.stopped.reason})` : r.state),
      `${count(r.finished)}/${count(r.tasks)}`,
      `${tokens(r.net)} of ~${tokens(r.estimated)}${r.budget === null ? '' : ` (budget ${tokensWithUnit(r.budget)})`}`,
      time(r.started_at),
      time(r.finished_at),
      duration(r.active_ms),
      r.exit_code ?? '–',
    ]);
    const list =
      runs.length === 0
        ? h('p.muted', {}, 'No runs in this state file yet.')
        : table(['run', 'state', 'finished', 'net tokens', 'started', 'last end', 'active', 'exit'], rows);
    replace('runs', h('section', {}, h('h1', {}, 'Runs'), list));
  };
  main.replaceChildren(h('section', { id: 'runs' }));
  await render();
  // A run event only asks for a read (the router gathers them, at most one every ~2 s).
  return { refresh: render, onRun() {} };
}
