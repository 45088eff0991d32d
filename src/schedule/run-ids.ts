// Each firing of a schedule is a run of its own only when the manifest's `run:` template names each firing's
// run apart. Two firings with one run id are one run: the first finishes it, and every later one finds it
// done, sends nothing and says "finished". A manifest whose firings would share a run id is refused when
// `schedule` starts, before any firing.

import { stampOf } from '../manifest/clock.js';
import { parseTemplate } from '../manifest/template.js';
import type { CronSchedule } from './next.js';
import { formatInZone } from './zone.js';

/** Firings looked at for two on one day (a schedule of several times a day has two on its first day). */
const LOOK_AHEAD = 400;

const ADD_DATE = '`run: "{{name}}-{{date}}"` (`{{datetime}}` when it fires more than once a day)';

/**
 * Why the firings of `schedule` from `from` on would share a run id, or undefined when each has its own.
 * The time is the template's only part that changes: `{{datetime}}` (to the second) names every firing
 * apart, `{{date}}` those on different days in the manifest's timezone; names and vars never change.
 */
export function sharedRunProblem(
  m: { run?: string; runId: string },
  schedule: CronSchedule,
  from: Date,
): string | undefined {
  if (m.run === undefined) {
    return `run: missing, so every firing is run ${m.runId}: the first firing finishes it and each later one finds it done and sends nothing; add e.g. ${ADD_DATE} to the manifest`;
  }
  const paths = new Set(
    (parseTemplate(m.run).template?.parts ?? []).flatMap((p) =>
      typeof p === 'string' ? [] : [p.path.join('.')],
    ),
  );
  if (paths.has('datetime')) return undefined;
  if (!paths.has('date')) {
    return `run: "${m.run}" names every firing's run ${m.runId}: the first firing finishes it and each later one finds it done and sends nothing; add {{date}} or {{datetime}} to it, e.g. ${ADD_DATE}`;
  }
  if (onceADay(schedule.expression)) return undefined;
  const zone = schedule.timezone;
  let at = schedule.next(from);
  for (let i = 0; i < LOOK_AHEAD; i++) {
    const following = schedule.next(at);
    const day = stampOf(at, zone).date;
    if (stampOf(following, zone).date === day) {
      return `run: "${m.run}" names the firings due ${formatInZone(at, zone)} and ${formatInZone(following, zone)} alike ({{date}} is ${day} for both): the second would find the first's run done and send nothing; use {{datetime}} instead of {{date}}`;
    }
    at = following;
  }
  return undefined;
}

/**
 * A second, minute and hour of one value each fire at most once a day: the scheduler fires a wall time
 * repeated in autumn once (next.ts). Without the look ahead, which takes about a second for a year of days.
 */
function onceADay(expression: string): boolean {
  const fields = expression.trim().split(/\s+/);
  const time = fields.length === 6 ? fields.slice(0, 3) : fields.slice(0, 2);
  return time.every((field) => /^\d+$/.test(field));
}
