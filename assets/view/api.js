// The page reads the same JSON API that scripts use (docs/view.md); the cookie carries the token.

export class ApiError extends Error {}

export async function getJson(path) {
  const res = await fetch(path, { credentials: 'same-origin', headers: { accept: 'application/json' } });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new ApiError(body.error ?? `${res.status} ${res.statusText}`);
  return body;
}

export const api = {
  runs: () => getJson('/api/runs'),
  run: (run) => getJson(`/api/runs/${encodeURIComponent(run)}`),
  tasks: (run, params) => {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
    return getJson(`/api/runs/${encodeURIComponent(run)}/tasks?${q}`);
  },
  task: (run, task) => getJson(`/api/runs/${encodeURIComponent(run)}/tasks/${encodeURIComponent(task)}`),
};
