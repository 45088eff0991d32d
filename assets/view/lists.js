// @ts-check
// The lists the page shares with the server (task states, review statuses, orders), read once from
// `/api/lists` before the first page draws: never copied here, so a state the server adds shows at once.
import { getJson } from './api.js';

/** @type {import('./api-types').Lists | null} */
let served = null;

export async function loadLists() {
  served = /** @type {import('./api-types').Lists} */ (await getJson('/api/lists'));
  return served;
}

/** The lists, after `loadLists()` (the router waits for it). */
export function lists() {
  if (served === null) throw new Error('the page asked for the lists before they were read');
  return served;
}
