// The pages: the runs list, a run (counters, charts, tables, results grid) and a task. Each page
// returns an object whose `refresh()` the live feed calls; sections are replaced in place, and result
// cards are kept by task id, so a playing video or the focused element survives an update. Each page
// gets `isCurrent()` from the router and asks it after every answer: a stale answer draws nothing.
import { api } from './api.js';
import { card } from './cards.js';
import { finishedChart, spendChart } from './charts.js';
import { bytes, duration, h, runHref, taskHref, time, tokens } from './dom.js';
import { bulkBar, markCard, reviewBadge, reviewControls } from './review.js';

const STATES = [
  'pending',
  'submitting',
  'submitted',
  'running',
  'downloading',
  'done',
  'in_doubt',
  'stalled',
  'unfetched',
  'failed',
  'rejected',
  'blocked',
  'lost',
  'skipped',
];

function table(headers, rows, attrs = {}) {
  return h(
    'table',
    attrs,
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        headers.map((x) => h('th', { scope: 'col' }, x)),
      ),
    ),
    h(
      'tbody',
      {},
      rows.map((r) =>
        h(
          'tr',
          {},
          r.map((c) => h('td', {}, c)),
        ),
      ),
    ),
  );
}

/** Puts `el` where the element with this id is, unless that one already shows the same (no redraw). */
function replace(id, el) {
  const old = document.getElementById(id);
  el.id = id;
  if (old?.isEqualNode(el)) return old;
  if (old) old.replaceWith(el);
  return el;
}

const always = () => true;

// ---- runs list --------------------------------------------------------------------------------------

export async function runsPage(main, isCurrent = always) {
  const render = async () => {
    const { runs } = await api.runs();
    if (!isCurrent()) return;
    const rows = runs.map((r) => [
      h('a', { href: runHref(r.id) }, r.id),
      h(`span.state.r-${r.state}`, {}, r.state),
      `${r.finished}/${r.tasks}`,
      `${tokens(r.net)} of ~${tokens(r.estimated)}${r.budget === null ? '' : ` (budget ${tokens(r.budget)})`}`,
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

// ---- a run ------------------------------------------------------------------------------------------

function counters(run) {
  return h(
    'div.counters',
    { id: 'counters' },
    h(
      'div.counter.total',
      { dataset: { state: 'total' } },
      h('span.n', {}, run.tasks),
      h('span.l', {}, 'tasks'),
    ),
    STATES.filter((s) => run.by_state[s] > 0 || ['pending', 'running', 'done', 'failed'].includes(s)).map(
      (s) =>
        h(
          `div.counter.s-${s}`,
          { dataset: { state: s } },
          h('span.n', {}, run.by_state[s]),
          h('span.l', {}, s.replace('_', ' ')),
        ),
    ),
  );
}

/** A run with reviewed tasks: how many await a decision, were approved, rejected, re-rolled. */
function reviewCounters(review) {
  if (!review) return h('div', { id: 'review-counters', hidden: true });
  const n = (state, value, label) =>
    h(
      `div.counter.rv-${state}`,
      { dataset: { review: state } },
      h('span.n', {}, value),
      h('span.l', {}, label),
    );
  return h(
    'div.counters.review-counters',
    { id: 'review-counters' },
    n('awaiting', review.awaiting, 'awaiting review'),
    n('waiting', review.waiting, 'wait for a review'),
    n('approved', review.approved, 'approved'),
    n('rejected', review.rejected, 'rejected'),
    n('rerolls', review.rerolls.asked, `re-rolls (${tokens(review.rerolls.net)} tokens)`),
  );
}

/** Said instead of figures while a large run's cost table and series are first read (figures_ready). */
const READING = 'figures are being read…';

function money(d) {
  const { run, finished_series: f } = d;
  const rate = f.rate_per_minute === null ? 'no rate yet' : `${tokens(f.rate_per_minute)} tasks/min`;
  const eta = f.estimated_end
    ? `estimated end ${time(f.estimated_end)} UTC`
    : f.unfinished === 0
      ? 'all finished'
      : 'no estimate yet';
  if (!d.figures_ready) {
    return h(
      'p.money',
      { id: 'money', dataset: { figures: 'reading' } },
      `Spend: ${READING}`,
      h('br'),
      h('span', { id: 'rate' }, `${run.finished}/${run.tasks} finished · active ${duration(run.active_ms)}`),
    );
  }
  return h(
    'p.money',
    { id: 'money' },
    `Net ${tokens(run.net)} tokens (charged ${tokens(run.charged)}, refunded ${tokens(run.refunded)}) · estimated ${tokens(run.estimated)} · worst case ${tokens(run.worst_case)}`,
    run.budget === null ? '' : ` · budget ${tokens(run.budget)}`,
    h('br'),
    h(
      'span',
      { id: 'rate' },
      `${run.finished}/${run.tasks} finished · ${rate} · ${eta} · active ${duration(run.active_ms)}`,
    ),
  );
}

function models(d) {
  if (!d.figures_ready) {
    return h('section', { id: 'models' }, h('h2', {}, 'Cost by model'), h('p.muted.reading', {}, READING));
  }
  return h(
    'section',
    { id: 'models' },
    h('h2', {}, 'Cost by model'),
    table(
      ['model', 'tasks', 'done', 'estimated', 'charged', 'refunded', 'net'],
      d.models.map((m) => [
        m.model,
        m.tasks,
        m.done,
        tokens(m.estimated),
        tokens(m.charged),
        tokens(m.refunded),
        tokens(m.net),
      ]),
    ),
  );
}

function failures(run, d) {
  const body =
    d.failures.length === 0
      ? h('p.muted', {}, 'No failures.')
      : table(
          ['reason', 'count', 'tasks'],
          d.failures.map((f) => [
            h('span.reason', {}, f.reason),
            h('span.count', {}, f.count),
            h(
              'span',
              {},
              f.tasks.map((t, i) => [i > 0 ? ', ' : '', h('a', { href: taskHref(run, t) }, t)]),
              f.count > f.tasks.length ? ' …' : '',
            ),
          ]),
          { class: 'failures' },
        );
  return h('section', { id: 'failures' }, h('h2', {}, 'Failures by reason'), body);
}

function advice(d) {
  const parts = [];
  if (d.in_doubt.tasks > 0) {
    parts.push(
      h('p.advice.in-doubt', {}, d.in_doubt.advice),
      h(
        'p.advice',
        {},
        `--retry-in-doubt would cost about ${tokens(d.in_doubt.retry_estimate)} tokens, at most ${tokens(d.in_doubt.retry_max)}.`,
      ),
    );
  }
  if (d.unfinished.advice) parts.push(h('p.advice', {}, d.unfinished.advice));
  const paid = Object.entries(d.paid_not_on_disk).filter(([, v]) => v.tasks > 0);
  if (paid.length > 0) {
    parts.push(
      h(
        'p.advice',
        {},
        `Paid, not on disk: ${paid.map(([s, v]) => `${v.tasks} ${s} (${tokens(v.tokens)} tokens)`).join(', ')}.`,
      ),
    );
  }
  return h('section', { id: 'in-doubt' }, parts.length === 0 ? null : h('h2', {}, 'Needs you'), parts);
}

function chains(run, d) {
  if (d.chains.length === 0) return h('section', { id: 'chains' });
  return h(
    'section',
    { id: 'chains' },
    h('h2', {}, 'Chains waiting'),
    table(
      ['task', 'state', 'waits for'],
      d.chains.map((c) => [
        h('a', { href: taskHref(run, c.task) }, c.task),
        c.state,
        c.after.map((u, i) => [
          i > 0 ? ', ' : '',
          h('a', { href: taskHref(run, u.task) }, u.task),
          ` (${u.state ?? 'not in the run'})`,
        ]),
      ]),
    ),
  );
}

function filters(d, state, onChange) {
  const select = (name, label, options, value) =>
    h(
      'label',
      {},
      `${label} `,
      h(
        'select',
        { name, onchange: (e) => onChange(name, e.target.value) },
        options.map(([v, t]) => h('option', { value: v, selected: v === value }, t)),
      ),
    );
  const modelsList = [['', 'all'], ...d.models.map((m) => [m.model, m.model])];
  const statesList = [['', 'all'], ...STATES.map((s) => [s, s.replace('_', ' ')])];
  let timer;
  return h(
    'form.filters',
    { id: 'filters', role: 'search', onsubmit: (e) => e.preventDefault() },
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
      [
        ['newest', 'newest first'],
        ['id', 'by task id'],
      ],
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
        oninput: (e) => {
          clearTimeout(timer);
          timer = setTimeout(() => onChange('q', e.target.value), 250);
        },
      }),
    ),
  );
}

/** The results grid: cards kept by task id across refreshes; "More" reads the next page by cursor. */
function resultsGrid(run, isCurrent) {
  const grid = h('div.grid', { id: 'grid', 'aria-live': 'polite' });
  const more = h('button.more', { type: 'button', hidden: true }, 'More results');
  const byId = new Map();
  let cursor = null;
  let query = { model: '', state: '', q: '', order: 'newest', review: '' };
  const place = (tasks, append) => {
    const els = tasks.map((t) => {
      const key = `${t.state}|${t.files.length}|${t.net}|${t.review?.status}|${t.review?.version}`;
      const old = byId.get(t.id);
      if (old && old.dataset.key === key) return markCard(old);
      const el = card(run, t);
      el.dataset.key = key;
      byId.set(t.id, el);
      return markCard(el);
    });
    if (append) grid.append(...els);
    // The same cards in the same order: nothing is touched (an image or a playing video stays as is).
    else if (els.length !== grid.children.length || els.some((el, i) => grid.children[i] !== el))
      grid.replaceChildren(...els);
    grid.dataset.count = String(grid.children.length);
  };
  const load = async (append) => {
    const page = await api.tasks(run, { ...query, limit: 48, cursor: append ? cursor : null });
    if (!isCurrent()) return;
    cursor = page.next_cursor;
    more.hidden = cursor === null;
    place(page.tasks, append);
  };
  more.addEventListener('click', () => load(true));
  return {
    grid,
    more,
    get query() {
      return query;
    },
    set(name, value) {
      query = { ...query, [name]: value };
      return load(false);
    },
    /** Live: the first page again, unless the reader has paged on (then new results wait for them). */
    refresh: () => (grid.children.length <= 48 ? load(false) : Promise.resolve()),
    load,
  };
}

/** Said above the charts while the figures are first read; empty once they are in. */
function figuresNote(d) {
  return h('p.muted.reading', { id: 'figures-note' }, d.figures_ready ? null : `Charts: ${READING}`);
}

/** The results: filters, the bar that decides for the selected cards, the keys, the grid. */
function resultsSection(run, d, results) {
  return h(
    'section',
    { id: 'results', dataset: { reviewRun: run } },
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
    results.grid,
    results.more,
  );
}

export async function runPage(main, run, isCurrent = always) {
  const results = resultsGrid(run, isCurrent);
  let d = await api.run(run);
  if (!isCurrent()) return null;
  let spend;
  let finished;
  const draw = () => {
    replace('counters', counters(d.run));
    replace('review-counters', reviewCounters(d.review));
    replace('money', money(d));
    replace('figures-note', figuresNote(d));
    replace('models', models(d));
    replace('failures', failures(run, d));
    replace('in-doubt', advice(d));
    replace('chains', chains(run, d));
    spend.update(d.spend_series);
    finished.update(d.finished_series);
  };
  const spendEl = h('div.chart', { id: 'spend-chart' });
  const finishedEl = h('div.chart', { id: 'finished-chart' });
  main.replaceChildren(
    h('nav.crumbs', {}, h('a', { href: '#/' }, 'Runs'), ' / ', run),
    h('h1', {}, run, ' ', h(`span.state.r-${d.run.state}`, { id: 'run-state' }, d.run.state)),
    h('p.muted', {}, d.run.manifest),
    counters(d.run),
    reviewCounters(d.review),
    money(d),
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
  spend = spendChart(spendEl, d.spend_series);
  finished = finishedChart(finishedEl, d.finished_series);
  await results.load(false);
  if (!isCurrent()) return null;
  main.dataset.ready = 'run';
  return {
    onRun(event) {
      if (event.run !== run) return;
      d = {
        ...d,
        run: {
          ...d.run,
          by_state: event.by_state,
          tasks: event.tasks,
          finished: event.finished,
          net: event.net,
          charged: event.charged,
          refunded: event.refunded,
        },
      };
      replace('counters', counters(d.run));
      const state = document.getElementById('run-state');
      if (state) state.textContent = event.state;
    },
    async refresh() {
      const next = await api.run(run);
      if (!isCurrent()) return;
      d = next;
      draw();
      await results.refresh();
    },
  };
}

// ---- a task -----------------------------------------------------------------------------------------

function kv(pairs) {
  return h(
    'dl.kv',
    {},
    pairs.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v ?? '–')]),
  );
}

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
        ` ${u.name ? `(${u.name}) ` : ''}· ${u.state ?? 'not in the run'}`,
      ),
    ),
  );
}

/** Every decision on a reviewed task, oldest first. */
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

/** The crumbs, the title with the state and the review badge, the error, the decision buttons. */
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
      t.id,
    ),
    h(
      'h1',
      {},
      t.id,
      ' ',
      h(`span.state.s-${t.state}`, { id: 'task-state' }, t.state.replace('_', ' ')),
      ' ',
      reviewBadge({ review: d.review }),
    ),
    t.error ? h('p.error', {}, t.error) : null,
    d.review ? reviewControls(run, { id: t.id, state: t.state, review: d.review }) : null,
  ];
}

function taskBody(run, d) {
  const t = d.task;
  const reviewable = d.review && t.state === 'done';
  return h(
    'div',
    {
      id: 'task',
      dataset: {
        reviewRun: run,
        task: t.id,
        ...(reviewable ? { version: String(d.review.version) } : {}),
      },
    },
    taskHead(run, d),
    h('div.media.big', {}, card(run, { ...t, net: 0, files: d.files, text: {} }).querySelector('.media')),
    kv([
      ['model', t.model],
      ['endpoint', t.endpoint],
      ['job', t.img_uuid],
      ['job status', t.job_status],
      ['estimate', `${tokens(t.estimate.tokens)} (${tokens(t.estimate.min)}–${tokens(t.estimate.max)})`],
      ['cost', tokens(t.cost)],
      ['refunded', tokens(t.refunded)],
      ['submitted', time(t.submitted_at)],
      ['finished', time(t.finished_at)],
      ['job duration', t.job_duration === null ? null : `${t.job_duration} s`],
      ['polls', t.polls],
    ]),
    decisions(d.review),
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

export async function taskPage(main, run, task, isCurrent = always) {
  let d = await api.task(run, task);
  if (!isCurrent()) return null;
  main.replaceChildren(taskBody(run, d));
  main.dataset.ready = 'task';
  let state = d.task.state;
  return {
    onRun() {},
    async refresh() {
      const next = await api.task(run, task);
      if (!isCurrent()) return;
      // Redrawn only when it moved, so a playing video is not restarted by another task's change.
      const same = next.review?.version === d.review?.version;
      if (next.task.state === state && next.ledger.length === d.ledger.length && same) return;
      state = next.task.state;
      d = next;
      replace('task', taskBody(run, next));
    },
  };
}
