// The gallery's script, inlined into index.html. Plain ES2020 for any current browser, no libraries.
// It builds every element from the inline JSON with textContent and setAttribute, never innerHTML, so
// a task id or an error text can never become markup. Cards are rendered a page at a time as the
// reader scrolls (IntersectionObserver), so a run of thousands of tasks opens at once.
// (No backticks or dollar-brace in here: this text lives in a TypeScript template literal.)

export const GALLERY_JS = `
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('gallery-data').textContent);
  var tasks = data.tasks;
  var grid = document.getElementById('grid');
  var sentinel = document.getElementById('sentinel');
  var countEl = document.getElementById('count');
  var modelSel = document.getElementById('f-model');
  var chipsEl = document.getElementById('f-status');
  var search = document.getElementById('f-search');
  var lightbox = document.getElementById('lightbox');
  var PAGE = 48;
  var ORDER = ['done', 'unfetched', 'lost', 'failed', 'in_doubt', 'stalled', 'rejected', 'blocked', 'skipped', 'awaiting_review', 'pending', 'submitting', 'submitted', 'running', 'downloading'];
  var LABEL = { done: 'done', failed: 'failed', in_doubt: 'in doubt', rejected: 'rejected', blocked: 'blocked', pending: 'pending',
    submitting: 'submitting', submitted: 'submitted', running: 'running', downloading: 'downloading',
    unfetched: 'not on disk', stalled: 'stalled', lost: 'lost', skipped: 'skipped',
    awaiting_review: 'waits for review' };
  // A reviewed task's decision, as a badge and as filters ("awaiting review").
  var REVIEW = ['awaiting', 'approved', 'rejected', 'waiting'];
  var REVIEW_LABEL = { awaiting: 'awaiting review', approved: 'approved', rejected: 'rejected', waiting: 'review pending' };
  var ICON = { failed: '\\u2715', in_doubt: '?', rejected: '\\u2298', blocked: '\\u23F8', done: '\\u2713',
    unfetched: '\\u2913', stalled: '\\u231B', lost: '\\u2205' };
  // What a paid card without its result says, in place of the picture or player.
  var PAID = {
    unfetched: ['Paid, result not on disk yet', 'The command under "Needs your attention" fetches it (nothing is charged twice).'],
    stalled: ['Paid, still being made past its deadline', 'The command under "Needs your attention" keeps watching it.'],
    lost: ['Paid, result lost', 'The service no longer has it; the reason is below.']
  };
  var AUDIO_TYPES = { mp3: 'audio/mpeg', wav: 'audio/wav', m4a: 'audio/mp4', ogg: 'audio/ogg', flac: 'audio/flac' };
  var VIDEO_TYPES = { mp4: 'video/mp4', webm: 'video/webm', mov: 'video/quicktime' };
  var state = { model: 'all', status: 'all', q: '' };
  var list = [];
  var shown = 0;

  function h(tag, props) {
    var el = document.createElement(tag);
    if (props) {
      for (var k in props) {
        var v = props[k];
        if (v === null || v === undefined || v === false) continue;
        if (k === 'class') el.className = v;
        else if (k === 'text') el.textContent = String(v);
        else el.setAttribute(k, v === true ? '' : String(v));
      }
    }
    for (var i = 2; i < arguments.length; i++) {
      var kid = arguments[i];
      if (kid !== null && kid !== undefined && kid !== false) el.append(kid);
    }
    return el;
  }
  function url(path) { return path.split('/').map(encodeURIComponent).join('/'); }
  function ext(path) { var m = /\\.([a-z0-9]+)$/i.exec(path); return m ? m[1].toLowerCase() : ''; }
  // The rules of src/util/numbers.ts: tokens grouped with at most 4 decimals; cents, or up to 4
  // decimals for a non-zero amount under a cent.
  var TOKENS = new Intl.NumberFormat('en-US', { maximumFractionDigits: 4 });
  var CENTS = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  function tokens(n) { return TOKENS.format(Number(n.toFixed(4))); }
  // The unit after an amount as tokens() wrote it: singular only when it reads 1 (numbers.ts' withTokenUnit).
  function unit(text) { return text === '1' || text === '-1' ? ' token' : ' tokens'; }
  function usd(n) {
    var a = Math.abs(n);
    var t = a !== 0 && a < 0.005 ? TOKENS.format(a) : CENTS.format(a);
    return (n < 0 && t !== '0.00' ? '-' : '') + '$' + t;
  }
  function bytes(n) {
    if (n < 1024) return n + ' B';
    var units = ['KB', 'MB', 'GB', 'TB'], v = n / 1024, u = 0;
    while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
    return (v >= 100 ? v.toFixed(0) : v.toFixed(1)) + ' ' + units[u];
  }
  function seconds(s) {
    if (s === null || s === undefined) return '';
    if (s < 60) return Number(s.toFixed(1)) + ' s';
    var m = Math.floor(s / 60);
    return m < 60 ? m + ' min ' + Math.round(s % 60) + ' s' : Math.floor(m / 60) + ' h ' + (m % 60) + ' min';
  }
  function str(v) { return typeof v === 'string' ? v : (typeof v === 'number' ? String(v) : ''); }
  function hash(text) { var x = 2166136261; for (var i = 0; i < text.length; i++) { x ^= text.charCodeAt(i); x = Math.imul(x, 16777619); } return x >>> 0; }

  function wave(id) {
    var w = h('div', { class: 'wave', 'aria-hidden': 'true' });
    var x = hash(id) || 1;
    for (var i = 0; i < 32; i++) {
      x ^= x << 13; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
      var bar = h('i');
      bar.style.height = (12 + (x % 42)) + 'px';
      w.append(bar);
    }
    return w;
  }

  function player(kind, file) {
    var types = kind === 'video' ? VIDEO_TYPES : AUDIO_TYPES;
    var el = h(kind, { controls: true, preload: 'none' });
    if (kind === 'video') el.setAttribute('playsinline', '');
    el.append(h('source', { src: url(file.p), type: types[ext(file.p)] || null }));
    return el;
  }

  // A file is shown as what its bytes are: the store keeps the kind found in them, and an image-typed
  // file whose name ends in a video or audio extension is played, never put in an <img>.
  function kindOf(f) {
    if (f.k === 'video' || f.k === 'audio' || f.k === 'json') return f.k;
    var e = ext(f.p);
    if (VIDEO_TYPES[e]) return 'video';
    if (AUDIO_TYPES[e]) return 'audio';
    return f.k;
  }

  function media(t) {
    var images = t.files.filter(function (f) { return kindOf(f) === 'image'; });
    var videos = t.files.filter(function (f) { return kindOf(f) === 'video'; });
    var audios = t.files.filter(function (f) { return kindOf(f) === 'audio'; });
    if (videos.length > 0) {
      return h('div', { class: 'media' }, player('video', videos[0]),
        videos.length > 1 ? h('span', { class: 'kind', text: videos.length + ' videos' }) : null);
    }
    if (images.length > 0) {
      var box = h('div', { class: 'media' });
      box.append(thumb(images[0], t.i, ''));
      if (images.length > 1) {
        var strip = h('div', { class: 'strip' });
        images.slice(1, 5).forEach(function (f) { strip.append(thumb(f, t.i, '')); });
        box.append(strip, h('span', { class: 'kind', text: images.length + ' images' }));
      }
      return box;
    }
    if (audios.length > 0) {
      var songs = t.so || [];
      var panel = h('div', { class: 'media audio' }, wave(t.i));
      audios.slice(0, 2).forEach(function (f) {
        var name = f.p.split('/').pop();
        var song = songs.filter(function (s) { return s.file === name; })[0];
        if (song && str(song.title)) panel.append(h('div', { class: 'songtitle', text: str(song.title) }));
        panel.append(player('audio', f));
      });
      if (audios.length > 2) panel.append(h('span', { class: 'kind', text: audios.length + ' files' }));
      return panel;
    }
    var label = LABEL[t.s] || t.s;
    var paid = PAID[t.s];
    return h('div', { class: 'media empty s-' + t.s },
      h('div', { class: 'icon', 'aria-hidden': 'true', text: ICON[t.s] || '\\u2026' }),
      h('div', { text: paid ? paid[0] : t.s === 'done' ? 'no files' : label }),
      paid ? h('div', { class: 'hint', text: paid[1] }) : null);
  }

  function thumb(f, id, cls) {
    var img = h('img', { src: url(f.p), loading: 'lazy', decoding: 'async', alt: id + ' ' + f.p, class: cls || null });
    img.addEventListener('click', function () { openLightbox(f, id); });
    return img;
  }

  function openLightbox(f, id) {
    if (!lightbox || typeof lightbox.showModal !== 'function') { window.open(url(f.p)); return; }
    lightbox.replaceChildren(h('img', { src: url(f.p), alt: id }), h('div', { class: 'cap', text: id + ' \\u00B7 ' + f.p }));
    lightbox.showModal();
  }

  function sheet(s) {
    if (!s || typeof s !== 'object') return null;
    var box = h('dl', { class: 'sheet' });
    if (str(s.name)) box.append(h('div', { class: 'name', text: str(s.name) }));
    ['personality', 'backstory'].forEach(function (k) {
      if (str(s[k])) box.append(h('dt', { text: k }), h('dd', { text: str(s[k]) }));
    });
    var rest = {};
    Object.keys(s).forEach(function (k) { if (['name', 'personality', 'backstory'].indexOf(k) < 0) rest[k] = s[k]; });
    if (Object.keys(rest).length > 0) {
      box.append(h('details', { class: 'more' }, h('summary', { text: 'full character sheet' }),
        h('pre', { text: JSON.stringify(rest, null, 2) })));
    }
    return box;
  }

  function song(s) {
    var meta = [str(s.style), s.audio_duration ? seconds(Number(s.audio_duration)) : ''].filter(Boolean).join(' \\u00B7 ');
    var box = h('div', { class: 'song' },
      h('div', { class: 'st', text: str(s.title) || str(s.file) }),
      meta ? h('div', { class: 'sm', text: meta }) : null);
    if (str(s.lyrics)) box.append(h('details', { class: 'more' }, h('summary', { text: 'lyrics' }), h('pre', { text: str(s.lyrics) })));
    return box;
  }

  function card(t) {
    var c = h('article', { class: 'card s-' + t.s, 'data-status': t.s, 'data-model': t.m, 'data-id': t.i });
    c.append(media(t));
    var body = h('div', { class: 'body' },
      h('div', { class: 'titlerow' },
        h('span', { class: 'title', title: t.i, text: t.i }),
        h('span', { class: 'badge b-' + t.s, text: LABEL[t.s] || t.s }),
        t.rv ? h('span', { class: 'badge rv rv-' + t.rv.s, 'data-review': t.rv.s, title: t.rv.by ? 'by ' + t.rv.by + (t.rv.note ? ': ' + t.rv.note : '') : '',
          text: REVIEW_LABEL[t.rv.s] + (t.rv.a > 1 ? ' \u00B7 attempt ' + t.rv.a : '') }) : null),
      h('span', { class: 'model', text: t.m }));
    if (t.up) {
      var from = h('div', { class: 'after' }, 'from ');
      t.up.forEach(function (u, i) {
        if (i > 0) from.append(', ');
        from.append(h('a', { href: url(u.f) + '/', title: 'the task whose result this one took', text: (u.n ? u.n + ': ' : '') + u.t }));
      });
      body.append(from);
    }
    if (t.sh) body.append(sheet(t.sh));
    (t.so || []).forEach(function (s) { body.append(song(s)); });
    var marks = [
      t.a > 1 ? t.a + ' attempts' + (t.ac !== t.a ? ' (' + t.ac + ' charged)' : '') : null,
      t.rd ? 'recovered from doubt' : null,
      t.ca ? 'cost assumed (list price)' : null
    ].filter(Boolean);
    if (marks.length > 0) {
      body.append(h.apply(null, ['div', { class: 'marks' }].concat(marks.map(function (m) { return h('span', { class: 'mark', text: m }); }))));
    }
    if (PAID[t.s]) body.append(h('div', { class: 'paid', text: PAID[t.s][0] + ': ' + tokens(t.n) + unit(tokens(t.n)) }));
    if (t.pr) body.append(h('p', { class: 'prompt', title: t.pr, text: t.pr }));
    if (t.e) body.append(h('div', { class: 'error', text: t.e }));
    c.append(body);
    var size = t.files.reduce(function (n, f) { return n + f.b; }, 0);
    var took = t.t !== null ? ' \u00B7 took ' + seconds(t.t) : '';
    c.append(h('div', { class: 'foot' },
      h('span', { class: 'cost', title: 'charged ' + tokens(t.c) + ', refunded ' + tokens(t.r) + (t.ca ? ', list price booked: the API did not state the cost' : '') + took,
        text: tokens(t.n) + (t.ca ? '*' : '') + unit(tokens(t.n)) }),
      h('span', { text: usd(t.u) }),
      size > 0 ? h('span', { text: bytes(size) }) : null,
      t.files.length > 0 ? h('a', { href: url(t.f) + '/', text: 'folder' }) : null));
    return c;
  }

  function more() {
    var end = Math.min(list.length, shown + PAGE);
    var frag = document.createDocumentFragment();
    for (; shown < end; shown++) frag.append(card(list[shown]));
    grid.append(frag);
    countEl.textContent = list.length === tasks.length
      ? tasks.length + (tasks.length === 1 ? ' task' : ' tasks')
      : list.length + ' of ' + tasks.length + ' tasks';
    if (observer) { observer.unobserve(sentinel); if (shown < list.length) observer.observe(sentinel); }
  }

  function matches(t, ignoreStatus) {
    if (state.model !== 'all' && t.m !== state.model) return false;
    if (!ignoreStatus && state.status.indexOf('rv:') === 0) {
      if (!t.rv || 'rv:' + t.rv.s !== state.status) return false;
    } else if (!ignoreStatus && state.status !== 'all' && t.s !== state.status) return false;
    if (state.q) {
      var hay = (t.i + '\\n' + (t.pr || '') + '\\n' + (t.e || '')).toLowerCase();
      if (hay.indexOf(state.q) < 0) return false;
    }
    return true;
  }

  function chips() {
    var counts = {};
    var all = 0;
    tasks.forEach(function (t) {
      if (!matches(t, true)) return;
      counts[t.s] = (counts[t.s] || 0) + 1;
      if (t.rv) counts['rv:' + t.rv.s] = (counts['rv:' + t.rv.s] || 0) + 1;
      all++;
    });
    chipsEl.replaceChildren();
    var add = function (value, label, n) {
      var b = h('button', { type: 'button', class: 'chip', 'data-status': value, 'aria-pressed': String(state.status === value) },
        label, h('span', { class: 'n', text: String(n) }));
      b.addEventListener('click', function () { state.status = value; apply(); });
      chipsEl.append(b);
    };
    add('all', 'all', all);
    ORDER.forEach(function (s) { if (counts[s] || state.status === s) add(s, LABEL[s], counts[s] || 0); });
    REVIEW.forEach(function (r) { var v = 'rv:' + r; if (counts[v] || state.status === v) add(v, REVIEW_LABEL[r], counts[v] || 0); });
  }

  function apply() {
    list = tasks.filter(function (t) { return matches(t, false); });
    shown = 0;
    grid.replaceChildren();
    chips();
    more();
    if (list.length === 0) grid.append(h('div', { class: 'empty-state', text: 'No task matches these filters.' }));
  }

  var models = {};
  tasks.forEach(function (t) { models[t.m] = (models[t.m] || 0) + 1; });
  modelSel.append(h('option', { value: 'all', text: 'All models (' + tasks.length + ')' }));
  Object.keys(models).sort().forEach(function (m) { modelSel.append(h('option', { value: m, text: m + ' (' + models[m] + ')' })); });
  modelSel.addEventListener('change', function () { state.model = modelSel.value; apply(); });
  var timer = 0;
  search.addEventListener('input', function () {
    clearTimeout(timer);
    timer = setTimeout(function () { state.q = search.value.trim().toLowerCase(); apply(); }, 120);
  });
  if (lightbox) lightbox.addEventListener('click', function () { lightbox.close(); });

  var observer = 'IntersectionObserver' in window
    ? new IntersectionObserver(function (entries) {
        if (entries.some(function (e) { return e.isIntersecting; })) more();
      }, { rootMargin: '1200px 0px' })
    : null;
  if (!observer) PAGE = Infinity;
  apply();
})();
`;
