// The page reads the same JSON API that scripts use (docs/view.md); the cookie carries the token.

export class ApiError extends Error {}

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

export const api = {
  runs: () => getJson('/api/runs'),
  run: (run) => getJson(`/api/runs/${encodeURIComponent(run)}`),
  tasks: (run, params) => {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
    return getJson(`/api/runs/${encodeURIComponent(run)}/tasks?${q}`);
  },
  rerollPrice: (run, ids) =>
    getJson(`/api/runs/${encodeURIComponent(run)}/reroll-price?taskIds=${encodeURIComponent(ids.join(','))}`),
  decide: (run, body) => postJson(`/api/runs/${encodeURIComponent(run)}/decisions`, body),
  task: (run, task) => getJson(`/api/runs/${encodeURIComponent(run)}/tasks/${encodeURIComponent(task)}`),
};
