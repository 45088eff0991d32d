// @ts-check
// A run's page: counters, money, charts, what needs the reader, the cost table, chains and the results.
// It returns the object whose `refresh()` the live feed calls; sections are replaced in place by id.
import { api } from './api.js';
import { finishedChart, spendChart } from './charts.js';
import { always, h, replace } from './dom.js';
import { resultsGrid, resultsSection } from './results.js';
import {
  advice,
  chains,
  counters,
  failures,
  figuresNote,
  models,
  money,
  reviewCounters,
  skewOf,
  tickAges,
  workers,
} from './run-sections.js';

/** @typedef {import('./api-types').RunDetail} RunDetail */
/** @typedef {import('./api-types').RunEvent} RunEvent */
/** @typedef {import('./api-types').WorkersAnswer} WorkersAnswer */
/** @typedef {import('./api-types').RunHead} RunHead */

/** The heartbeats' ages move this often (by the clock, nothing read). */
const AGE_TICK_MS = 1000;

/**
 * Why a run that did not finish stopped, in the words it stopped with; nothing while it runs or once done.
 * @param {RunHead['stopped']} stopped
 */
const stoppedNote = (stopped) =>
  stopped === null || stopped === undefined
    ? h('p', { id: 'run-stopped', hidden: true })
    : h(
        'p.stopped',
        { id: 'run-stopped' },
        h('strong', {}, `Stopped (${stopped.label ?? stopped.reason}): `),
        stopped.message,
      );

/**
 * The run's state as a badge whose colour follows it (its class names the state).
 * @param {string} state
 */
const runState = (state) => h(`span.state.r-${state}`, { id: 'run-state' }, state);

/**
 * @param {HTMLElement} main
 * @param {string} run
 * @param {() => boolean} [isCurrent]
 */
export async function runPage(main, run, isCurrent = always) {
  const results = resultsGrid(run, isCurrent);
  const first = await Promise.all([api.run(run), api.workers(run)]);
  /** @type {RunDetail} */
  let d = first[0];
  /** @type {WorkersAnswer} */
  let w = first[1];
  let skew = skewOf(w);
  if (!isCurrent()) return null;
  const spendEl = h('div.chart', { id: 'spend-chart' });
  const finishedEl = h('div.chart', { id: 'finished-chart' });
  main.replaceChildren(
    h('nav.crumbs', {}, h('a', { href: '#/' }, 'Runs'), ' / ', run),
    h('h1', {}, h('span.run-id', {}, run), ' ', runState(d.run.state)),
    h('p.muted.manifest', {}, d.run.manifest),
    stoppedNote(d.run.stopped),
    counters(d.run),
    reviewCounters(d.review),
    money(d),
    workers(w, skew),
    figuresNote(d),
    h(
      'div.charts',
      {},
      h('figure', {}, h('figcaption', {}, 'Spend over time'), spendEl),
      h('figure', {}, h('figcaption', {}, 'Tasks finished over time'), finishedEl),
    ),
    advice(d),
    failures(run, d),
    models(d),
    chains(run, d),
    resultsSection(run, d, results),
  );
  const spend = spendChart(spendEl, d.spend_series);
  const finished = finishedChart(finishedEl, d.finished_series);
  const draw = () => {
    replace('run-state', runState(d.run.state));
    replace('run-stopped', stoppedNote(d.run.stopped));
    replace('counters', counters(d.run));
    replace('review-counters', reviewCounters(d.review));
    replace('money', money(d));
    replace('workers', workers(w, skew));
    replace('figures-note', figuresNote(d));
    replace('models', models(d));
    replace('failures', failures(run, d));
    replace('in-doubt', advice(d));
    replace('chains', chains(run, d));
    spend.update(d.spend_series);
    finished.update(d.finished_series);
  };
  await results.load('new');
  if (!isCurrent()) return null;
  main.dataset['ready'] = 'run';
  const ages = setInterval(() => (isCurrent() ? tickAges(skew) : clearInterval(ages)), AGE_TICK_MS);
  /** @param {WorkersAnswer} next */
  const showWorkers = (next) => {
    w = next;
    skew = skewOf(next);
    replace('workers', workers(w, skew));
  };
  return {
    /** The live counters, straight from the event (the rest waits for the next read). @param {RunEvent} event */
    onRun(event) {
      if (event.run !== run) return;
      const { by_state, tasks, finished: done, net, charged, refunded, state } = event;
      // A run going again, or finished, has no stop reason; a new one comes with the next read.
      const stopped = state === 'running' || state === 'finished' ? null : d.run.stopped;
      d = {
        ...d,
        run: { ...d.run, by_state, tasks, finished: done, net, charged, refunded, state, stopped },
      };
      replace('counters', counters(d.run));
      replace('run-state', runState(state));
    },
    /** The workers panel, straight from the event. @param {WorkersAnswer} event */
    onWorkers(event) {
      if (event.run === run && isCurrent()) showWorkers(event);
    },
    async refresh() {
      const [next, nextWorkers] = await Promise.all([api.run(run), api.workers(run)]);
      if (!isCurrent()) return;
      d = next;
      w = nextWorkers;
      skew = skewOf(nextWorkers);
      draw();
      await results.refresh();
    },
  };
}
