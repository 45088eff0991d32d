// @ts-check
// The run page's two charts, drawn with uPlot (served by the view from its npm package). They take the
// width of their box (and follow it when it changes: a phone turned, a window narrowed); the time axis
// reads in the page's ISO format (UTC) at any span, one point included; counts have whole ticks.

import { count, tokens, tokensWithUnit } from './format.js';
import uPlot from './uPlot.esm.js';

/** @typedef {import('./api-types').SpendSeries} SpendSeries */
/** @typedef {import('./api-types').FinishedSeries} FinishedSeries */
/** @typedef {uPlot.AlignedData} Data */

const HEIGHT = 220;
/** One point in time still gets a minute of axis around it, not the years uPlot would guess. */
const LONE_POINT_PAD_S = 30;
/** Whole steps only for counts (tasks), and round ones for tokens. */
const COUNT_STEPS = [
  1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1e3, 2e3, 2500, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6,
];

/** Seconds between time ticks: from one second to a week. */
const TIME_STEPS = [
  1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800,
];

/** @param {HTMLElement} el */
const width = (el) => Math.max(200, Math.floor(el.getBoundingClientRect().width) || 600);

/**
 * `14:34:05` within a day, `11-27 14:34` beyond; always UTC, as the page's other times.
 * @param {number} span seconds shown
 * @param {number} s seconds since the epoch
 */
function tick(span, s) {
  const iso = new Date(s * 1000).toISOString();
  return span < 86_400 ? iso.slice(11, span < 600 ? 19 : 16) : `${iso.slice(5, 10)} ${iso.slice(11, 16)}`;
}

/**
 * The labels an axis drew, kept on the chart's box (`data-x-ticks`, `data-y-ticks`): uPlot draws them on
 * a canvas, where neither tests nor readers could find them.
 * @param {uPlot} u
 * @param {string} name
 * @param {string[]} labels
 */
function noted(u, name, labels) {
  u.root.parentElement?.setAttribute(`data-${name}-ticks`, labels.join(' | '));
  return labels;
}

/** @type {uPlot.Axis} */
const timeAxis = {
  values: (u, splits) => {
    const span = (u.scales['x']?.max ?? 0) - (u.scales['x']?.min ?? 0);
    return noted(
      u,
      'x',
      splits.map((s) => tick(span, s)),
    );
  },
  // Whole seconds at the least: labels are to the second, so finer steps would repeat them.
  incrs: TIME_STEPS,
  space: 70,
};

/**
 * @param {string} label
 * @param {(n: number) => string} format
 * @param {number[]} [incrs] the steps between ticks (uPlot's own when not given)
 * @returns {uPlot.Axis}
 */
const valueAxis = (label, format, incrs) => ({
  label,
  ...(incrs ? { incrs } : {}),
  values: (u, splits) =>
    noted(
      u,
      'y',
      splits.map((v) => format(v)),
    ),
  size: 60,
});

/**
 * The legend's value under the cursor, formatted as the page's figures are.
 * @param {(n: number) => string} format
 * @returns {(u: uPlot, v: number | null) => string}
 */
const legend = (format) => (_u, v) => (v === null ? '–' : format(v));

/** @type {uPlot.Scale.Range} */
const fromZero = (_u, _min, max) => [0, Math.max(1, max) * 1.1];

/**
 * One point in time gets a minute of axis around it (empty on both sides), not the years uPlot would
 * guess from a span of zero.
 * @param {number[]} xs seconds
 * @param {Array<Array<number | null>>} columns
 * @returns {Data}
 */
function padded(xs, columns) {
  const first = xs[0];
  if (xs.length !== 1 || first === undefined) return [xs, ...columns];
  return [
    [first - LONE_POINT_PAD_S, first, first + LONE_POINT_PAD_S],
    ...columns.map((c) => [null, c[0] ?? null, null]),
  ];
}

/** @param {ArrayLike<number | null | undefined> | undefined} column */
const lastOf = (column) => Array.from(column ?? []).findLast((v) => v !== null && v !== undefined) ?? 0;

/** @param {SpendSeries} s @returns {Data} */
function spendData(s) {
  /** @type {SpendSeries['points']} */
  const pts = s.points.length > 0 ? s.points : [[Date.now(), 0, 0, 0]];
  const flat = (/** @type {number | null} */ v) => pts.map(() => v);
  return padded(
    pts.map((p) => (p[0] ?? 0) / 1000),
    [1, 2, 3].map((i) => pts.map((p) => p[i] ?? null)).concat([flat(s.budget), flat(s.worst_case)]),
  );
}

/** @param {FinishedSeries} f @returns {Data} */
function finishedData(f) {
  /** @type {FinishedSeries['points']} */
  const pts = f.points.length > 0 ? f.points : [[Date.now(), 0]];
  return padded(
    pts.map((p) => (p[0] ?? 0) / 1000),
    [pts.map((p) => p[1] ?? null)],
  );
}

/**
 * A chart that redraws with new data; `el` gets data-points for tests and screen readers get a label.
 * @param {HTMLElement} el
 * @param {Omit<uPlot.Options, 'width' | 'height'>} opts
 * @param {Data} data
 * @param {(d: Data) => string} label
 */
function chart(el, opts, data, label) {
  el.setAttribute('role', 'img');
  const plot = new uPlot({ width: width(el), height: HEIGHT, ...opts }, data, el);
  /** @param {Data} d */
  const mark = (d) => {
    el.dataset['points'] = String(d[0].length);
    el.dataset['last'] = String(lastOf(d[1]));
    el.setAttribute('aria-label', label(d));
  };
  mark(data);
  let shown = JSON.stringify(data);
  let shownWidth = width(el);
  const resized = new ResizeObserver(() => {
    if (width(el) === shownWidth) return;
    shownWidth = width(el);
    plot.setSize({ width: shownWidth, height: HEIGHT });
  });
  resized.observe(el);
  return {
    /** Redraws only when the points moved: a live run's reads mostly bring the same series. @param {Data} next */
    update(next) {
      const text = JSON.stringify(next);
      if (text === shown) return;
      shown = text;
      plot.setData(next);
      mark(next);
    },
    destroy() {
      resized.disconnect();
      plot.destroy();
    },
  };
}

/**
 * @param {HTMLElement} el
 * @param {SpendSeries} series
 */
export function spendChart(el, series) {
  /** @type {Omit<uPlot.Options, 'width' | 'height'>} */
  const opts = {
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
    scales: { x: { time: true }, y: { range: fromZero } },
    series: [
      { value: (_u, v) => (v === null ? '–' : tick(0, v)) },
      { label: 'charged', stroke: '#c0392b', width: 2, value: legend(tokens) },
      { label: 'refunded', stroke: '#2980b9', width: 2, value: legend(tokens) },
      { label: 'net', stroke: '#27ae60', width: 2, value: legend(tokens) },
      {
        label: 'budget',
        stroke: '#7f8c8d',
        dash: [6, 4],
        show: series.budget !== null,
        value: legend(tokens),
      },
      { label: 'worst case', stroke: '#e67e22', dash: [2, 4], value: legend(tokens) },
    ],
    axes: [timeAxis, valueAxis('tokens', tokens)],
  };
  const c = chart(el, opts, spendData(series), (d) => `spend: net ${tokensWithUnit(lastOf(d[3]))}`);
  return { update: (/** @type {SpendSeries} */ s) => c.update(spendData(s)), destroy: c.destroy };
}

/**
 * @param {HTMLElement} el
 * @param {FinishedSeries} series
 */
export function finishedChart(el, series) {
  /** @type {Omit<uPlot.Options, 'width' | 'height'>} */
  const opts = {
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
    scales: { x: { time: true }, y: { range: fromZero } },
    series: [
      { value: (_u, v) => (v === null ? '–' : tick(0, v)) },
      { label: 'finished', stroke: '#8e44ad', width: 2, fill: 'rgba(142,68,173,0.1)', value: legend(count) },
    ],
    axes: [timeAxis, valueAxis('tasks', count, COUNT_STEPS)],
  };
  const c = chart(el, opts, finishedData(series), (d) => `${count(lastOf(d[1]))} tasks finished`);
  return { update: (/** @type {FinishedSeries} */ s) => c.update(finishedData(s)), destroy: c.destroy };
}
