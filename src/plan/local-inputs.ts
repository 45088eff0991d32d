// `file:` inputs at plan time: measured on the local disk (no upload, no network) after the same checks
// `run` relies on (inside the manifest's folder, a regular file, the field's media kind by its bytes).
import pLimit from 'p-limit';
import type { CatalogEntry } from '../catalog/types.js';
import { ProblemFold } from '../manifest/problems.js';
import type { ManifestProblem } from '../manifest/types.js';
import { checkLocalInput, LocalInputError, localRef, localRefsIn } from '../media/local-input.js';
import type { MediaKind, ProbeResult } from '../media/types.js';
import { type CheckedTask, type MediaNeed, problemFromIssue } from './plan.js';

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

/** The media kind of a request field: the catalog's, else what its name says (image_url, video_url…). */
export function localInputKind(entry: CatalogEntry | undefined, field: string): MediaKind {
  const known = entry?.mediaFields.find((f) => f.field === field)?.kind;
  if (known) return known;
  if (/video/i.test(field)) return 'video';
  if (/audio|voice|song|music/i.test(field)) return 'audio';
  return 'image';
}

interface Checked {
  path: string;
  kind: MediaKind;
  maxBytes: number;
  /**
   * The tasks that use the file, one problem each should the file be refused, folded as they come: one
   * entry per place in the manifest and field, however many tasks.
   */
  sites: ProblemFold;
}

/**
 * `validate` (and `plan`, `run`) check every local input on the disk, with no network: it exists, is a
 * regular file inside the manifest's folder, within its field's size, of its field's media kind by its
 * bytes. Each distinct file is checked once however many tasks use it (a glob of 100,000 photos is
 * 100,000 checks, not one per task), and only a few tasks per file are kept to be named in problems.
 */
export class LocalInputChecks {
  readonly #dir: string;
  readonly #allowOutside: boolean;
  readonly #files = new Map<string, Checked>();

  constructor(dir: string, allowOutside: boolean) {
    this.#dir = dir;
    this.#allowOutside = allowOutside;
  }

  /** Notes the local inputs of one checked task. */
  add(task: CheckedTask): void {
    for (const { field, index, path } of localRefsIn(task.body)) {
      const kind = localInputKind(task.entry, field);
      const maxBytes =
        task.entry.mediaFields.find((f) => f.field === field)?.maxBytes ?? Number.POSITIVE_INFINITY;
      const key = `${kind}\0${maxBytes}\0${path}`;
      let file = this.#files.get(key);
      if (!file) {
        file = { path, kind, maxBytes, sites: new ProblemFold() };
        this.#files.set(key, file);
      }
      const fieldPath = index === undefined ? field : `${field}.${index}`;
      // The message is the file's, once it is checked: the place and field tell the sites apart.
      file.sites.add(problemFromIssue(task.spec, fieldPath, ''));
    }
  }

  /** Every problem, located at the tasks that use the file (folded by place), once the files are checked. */
  async problems(): Promise<ManifestProblem[]> {
    const limit = pLimit(8);
    const checked = await Promise.all(
      [...this.#files.values()].map((file) =>
        limit(async () => {
          try {
            await checkLocalInput(this.#dir, file.path, file.kind, {
              maxBytes: file.maxBytes,
              allowOutside: this.#allowOutside,
            });
            return [];
          } catch (error) {
            if (!(error instanceof LocalInputError)) throw error;
            return file.sites.lines().map((site) => ({ ...site, message: error.message }));
          }
        }),
      ),
    );
    return checked.flat();
  }
}
