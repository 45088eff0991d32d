// @ts-check
// A tiny element builder: every text goes in as a text node, so nothing from the state file is parsed
// as HTML (results carry prompts and errors written by others). Plus the page's links and tables.

/** @typedef {import('./page-types').Child} Child */

/**
 * h('a.card', { href: '#/x' }, 'text', child)
 * @param {string} tag
 * @param {Record<string, unknown>} [attrs]
 * @param {...Child} children
 * @returns {HTMLElement}
 */
export function h(tag, attrs = {}, ...children) {
  const [name, ...classes] = tag.split('.');
  const el = document.createElement(name || 'div');
  if (classes.length > 0) el.className = classes.join(' ');
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), /** @type {EventListener} */ (value));
    } else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (value === true) el.setAttribute(key, '');
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

/**
 * @param {HTMLElement} el
 * @param {Child[]} children
 */
function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

/**
 * A table that scrolls sideways inside its own box on a narrow screen (the page itself never does).
 * @param {Child[]} headers
 * @param {Child[][]} rows
 * @param {Record<string, unknown>} [attrs]
 */
export function table(headers, rows, attrs = {}) {
  return h(
    'div.table-box',
    {},
    h(
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
    ),
  );
}

/**
 * Puts `el` where the element with this id is, unless that one already shows the same (no redraw).
 * @param {string} id
 * @param {HTMLElement} el
 */
export function replace(id, el) {
  const old = document.getElementById(id);
  el.id = id;
  if (old?.isEqualNode(el)) return old;
  if (old) old.replaceWith(el);
  return el;
}

/** @param {string} run */
export function runHref(run) {
  return `#/run/${encodeURIComponent(run)}`;
}

/**
 * @param {string} run
 * @param {string} task
 */
export function taskHref(run, task) {
  return `#/run/${encodeURIComponent(run)}/task/${encodeURIComponent(task)}`;
}

/** Pages are given this by the router: still the route the reader is on (a stale answer draws nothing). */
export const always = () => true;
