// `file:` inputs at plan time: measured on the local disk (no upload, no network) after the same checks
// `run` relies on (inside the manifest's folder, a regular file, the field's media kind by its bytes).
import { checkLocalInput, localRef } from '../media/local-input.js';
import type { ProbeResult } from '../media/types.js';
import type { MediaNeed } from './plan.js';

type Measure = (needs: MediaNeed[]) => Promise<Map<string, ProbeResult>>;

/**
 * Wraps a measure so that `file:path` locations are checked and measured at their path under `dir`;
 * results come back under the location as written, where pricing looks them up.
 */
export function measuringLocalFiles(
  measure: Measure | undefined,
  dir: string,
  allowOutside: boolean,
): Measure {
  return async (needs) => {
    const remote: MediaNeed[] = [];
    const local = new Map<string, string>();
    const out = new Map<string, ProbeResult>();
    for (const need of needs) {
      const path = localRef(need.location);
      if (path === undefined) {
        remote.push(need);
        continue;
      }
      try {
        const input = await checkLocalInput(dir, path, need.kind, {
          maxBytes: Number.POSITIVE_INFINITY,
          allowOutside,
        });
        local.set(input.real, need.location);
        remote.push({ location: input.real, kind: need.kind });
      } catch (error) {
        out.set(need.location, { ok: false, reason: (error as Error).message });
      }
    }
    if (remote.length === 0 || !measure) return out;
    for (const [location, result] of await measure(remote)) out.set(local.get(location) ?? location, result);
    return out;
  };
}
