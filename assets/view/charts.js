// The run page's two charts, drawn with uPlot (served by the view from its npm package).
import uPlot from '/assets/uPlot.esm.js';

const size = (el) => ({ width: Math.max(320, el.clientWidth || 600), height: 220 });

function spendData(s) {
  const pts = s.points.length > 0 ? s.points : [[Date.now(), 0, 0, 0]];
  const xs = pts.map((p) => p[0] / 1000);
  const flat = (v) => pts.map(() => v);
  return [
    xs,
    pts.map((p) => p[1]),
    pts.map((p) => p[2]),
    pts.map((p) => p[3]),
    flat(s.budget),
    flat(s.worst_case),
  ];
}

function finishedData(f) {
  const pts = f.points.length > 0 ? f.points : [[Date.now(), 0]];
  return [pts.map((p) => p[0] / 1000), pts.map((p) => p[1])];
}

/** A chart that redraws with new data; `el` gets data-points for tests and screen readers get a label. */
function chart(el, opts, data, label) {
  el.setAttribute('role', 'img');
  const plot = new uPlot({ ...size(el), ...opts }, data, el);
  const mark = (d) => {
    el.dataset.points = String(d[0].length);
    el.dataset.last = String(d[1].at(-1) ?? 0);
    el.setAttribute('aria-label', label(d));
  };
  mark(data);
  let shown = JSON.stringify(data);
  return {
    /** Redraws only when the points moved: a live run's reads mostly bring the same series. */
    update(next) {
      const text = JSON.stringify(next);
      if (text === shown) return;
      shown = text;
      plot.setData(next);
      mark(next);
    },
    destroy: () => plot.destroy(),
  };
}

export function spendChart(el, series) {
  const opts = {
    series: [
      {},
      { label: 'charged', stroke: '#c0392b', width: 2 },
      { label: 'refunded', stroke: '#2980b9', width: 2 },
      { label: 'net', stroke: '#27ae60', width: 2 },
      { label: 'budget', stroke: '#7f8c8d', dash: [6, 4], show: series.budget !== null },
      { label: 'worst case', stroke: '#e67e22', dash: [2, 4] },
    ],
    axes: [{}, { label: 'tokens' }],
  };
  const c = chart(el, opts, spendData(series), (d) => `spend: net ${d[3].at(-1)} tokens`);
  return { update: (s) => c.update(spendData(s)), destroy: c.destroy };
}

export function finishedChart(el, series) {
  const opts = {
    series: [{}, { label: 'finished', stroke: '#8e44ad', width: 2, fill: 'rgba(142,68,173,0.1)' }],
    axes: [{}, { label: 'tasks' }],
  };
  const c = chart(el, opts, finishedData(series), (d) => `${d[1].at(-1)} tasks finished`);
  return { update: (s) => c.update(finishedData(s)), destroy: c.destroy };
}
