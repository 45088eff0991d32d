// `{{date}}` and `{{datetime}}` as the manifest's timezone sees `now` (UTC when it names none), so that a
// cron run at 01:00 in Tokyo is dated by Tokyo's calendar.

import { pad, wallOf } from '../util/zone.js';

export { isTimeZone } from '../util/zone.js';

export interface Stamp {
  /** YYYY-MM-DD */
  date: string;
  /** YYYY-MM-DDTHHMMSS, without colons so it can name files and run ids. */
  datetime: string;
}

export function stampOf(now: Date, timeZone = 'UTC'): Stamp {
  const w = wallOf(now, timeZone);
  const date = `${pad(w.year, 4)}-${pad(w.month)}-${pad(w.day)}`;
  return { date, datetime: `${date}T${pad(w.hour)}${pad(w.minute)}${pad(w.second)}` };
}
