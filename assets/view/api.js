// @ts-check
// The page reads the same JSON API that scripts use (docs/view.md); the cookie carries the token.

/** @typedef {import('./api-types').RunsAnswer} RunsAnswer */
/** @typedef {import('./api-types').RunDetail} RunDetail */
/** @typedef {import('./api-types').TaskPage} TaskPage */
/** @typedef {import('./api-types').TaskDetail} TaskDetail */
/** @typedef {import('./api-types').RerollPrice} RerollPrice */
/** @typedef {import('./api-types').DecisionAnswer} DecisionAnswer */

export class ApiError extends Error {}

/**
 * @param {string} path
 * @returns {Promise<unknown>}
 */
export async function getJson(path) {
  const res = await fetch(path, { credentials: 'same-origin', headers: { accept: 'application/json' } });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new ApiError(body.error ?? `${res.status} ${res.statusText}`);
  return body;
}

/** The view's token, put in the page by the server: writes need it in a header, not only the cookie. */
function token() {
  return document.querySelector('meta[name="mediabatch-token"]')?.getAttribute('content') ?? '';
}

/**
 * @param {string} path
 * @param {unknown} body
 * @returns {Promise<unknown>}
 */
export async function postJson(path, body) {
  const res = await fetch(path, {
    method: 'POST',
    credentials: 'same-origin',
    headers: {
      accept: 'application/json',
      'content-type': 'application/json',
      'x-mediabatch-token': token(),
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
