// What the view answers from the state file, with every registered secret taken out: a key may sit in
// it from a run made under another environment (pasted into a prompt, echoed by a server).

import { scrub } from '../util/secrets.js';

/** The value with each secret replaced; scrubbing its JSON text finds one at any depth, in JSON's form of it. */
export function scrubbed<T>(value: T): T {
  const text = JSON.stringify(value);
  if (text === undefined) return value;
  const clean = scrub(text);
  return clean === text ? value : (JSON.parse(clean) as T);
}
