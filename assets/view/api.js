// @ts-check
// The page reads the same JSON API that scripts use (docs/view.md). The cookie carries only the read key
// (a browser sends it to every port of 127.0.0.1); the token, which writes need, came in the page served
// to the printed address and is kept in this origin's storage, which no other port can read.

/** @typedef {import('./api-types').RunsAnswer} RunsAnswer */
/** @typedef {import('./api-types').RunDetail} RunDetail */
/** @typedef {import('./api-types').TaskPage} TaskPage */
/** @typedef {import('./api-types').TaskDetail} TaskDetail */
/** @typedef {import('./api-types').RerollPrice} RerollPrice */
/** @typedef {import('./api-types').DecisionAnswer} DecisionAnswer */
/** @typedef {import('./api-types').WorkersAnswer} WorkersAnswer */

export class ApiError extends Error {}

const TOKEN_KEY = 'mediabatch-view-token';
/** The token this very page was served with (kept in memory too: storage may be refused). */
let held = '';

/** Keeps the token the printed address brought, and takes it (and `?token=`) out of the address bar. */
function keepToken() {
  held = document.querySelector('meta[name="mediabatch-token"]')?.getAttribute('content') ?? '';
  if (held === '') return;
  try {
    localStorage.setItem(TOKEN_KEY, held);
  } catch {
    // Storage refused (a browser's privacy settings): this page still decides; a reload says how to.
  }
  const start = document.querySelector('meta[name="mediabatch-start"]')?.getAttribute('content') ?? '';
  history.replaceState(null, '', `/${location.hash || start}`);
}
keepToken();

/** The view's token, or '' when neither this page nor an earlier one of this origin was given it. */
function token() {
  if (held !== '') return held;
  try {
    return localStorage.getItem(TOKEN_KEY) ?? '';
  } catch {
    return '';
  }
}

/**
 * The token as a header: writes need it; reads take it too, so they go on if the cookie was overwritten.
 * @returns {Record<string, string>}
 */
function tokenHeader() {
  const t = token();
  return t === '' ? {} : { 'x-mediabatch-token': t };
}

/**
 * @param {string} path
 * @returns {Promise<unknown>}
 */
export async function getJson(path) {
  const res = await fetch(path, {
    credentials: 'same-origin',
    headers: { accept: 'application/json', ...tokenHeader() },
  });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new ApiError(body.error ?? `${res.status} ${res.statusText}`);
  return body;
}

/**
 * @param {string} path
 * @param {unknown} body
 * @returns {Promise<unknown>}
 */
export async function postJson(path, body) {
  if (token() === '') {
    throw new ApiError(
      'this page holds only the read cookie: open the address `mediabatch view` printed (…/?token=…) to approve, reject or re-roll',
    );
  }
  const res = await fetch(path, {
    method: 'POST',
    credentials: 'same-origin',
    headers: {
      accept: 'application/json',
      'content-type': 'application/json',
      ...tokenHeader(),
    },
    body: JSON.stringify(body),
  });
  const answer = await res.json().catch(() => ({}));
  // 409: every task refused, each with its reason in `outcomes`.
  if (!res.ok && !(res.status === 409 && Array.isArray(answer.outcomes))) {
    throw new ApiError(answer.error ?? `${res.status} ${res.statusText}`);
  }
  return answer;
}

/** @param {string} run */
const runPath = (run) => `/api/runs/${encodeURIComponent(run)}`;

export const api = {
  runs: async () => /** @type {RunsAnswer} */ (await getJson('/api/runs')),
  /** @param {string} run */
  run: async (run) => /** @type {RunDetail} */ (await getJson(runPath(run))),
  /**
   * @param {string} run
   * @param {Record<string, string | number | null | undefined>} params
   */
  tasks: async (run, params) => {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) {
      if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
    }
    return /** @type {TaskPage} */ (await getJson(`${runPath(run)}/tasks?${q}`));
  },
  /** @param {string} run */
  workers: async (run) => /** @type {WorkersAnswer} */ (await getJson(`${runPath(run)}/workers`)),
  /**
   * @param {string} run
   * @param {string[]} ids
   */
  rerollPrice: async (run, ids) =>
    /** @type {RerollPrice} */ (
      await getJson(`${runPath(run)}/reroll-price?taskIds=${encodeURIComponent(ids.join(','))}`)
    ),
  /**
   * @param {string} run
   * @param {{ taskIds: string[], verdict: string, note: string, expectedVersions: Record<string, number> }} body
   */
  decide: async (run, body) =>
    /** @type {DecisionAnswer} */ (await postJson(`${runPath(run)}/decisions`, body)),
  /**
   * @param {string} run
   * @param {string} task
   */
  task: async (run, task) =>
    /** @type {TaskDetail} */ (await getJson(`${runPath(run)}/tasks/${encodeURIComponent(task)}`)),
};
