// Wall-clock views of an instant in an IANA time zone, for log lines people read and for telling
// whether a moment is near a daylight-saving change. Intl only: no time library of our own.

import { pad, wallOf } from '../util/zone.js';

/** Minutes the zone is ahead of UTC at `at` (Berlin: 60 in winter, 120 in summer). */
export function offsetMinutes(at: Date, timeZone: string): number {
  const w = wallOf(at, timeZone);
  const wallAsUtc = Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second);
  const whole = Math.floor(at.getTime() / 1000) * 1000;
  return Math.round((wallAsUtc - whole) / 60_000);
}

/** `2026-03-29T03:00:00+02:00`: the wall time people expect, with the offset that makes it exact. */
export function formatInZone(at: Date, timeZone: string): string {
  const w = wallOf(at, timeZone);
  const offset = offsetMinutes(at, timeZone);
  const sign = offset < 0 ? '-' : '+';
  const zone = `${sign}${pad(Math.trunc(offset / 60))}:${pad(offset % 60)}`;
  return `${pad(w.year, 4)}-${pad(w.month)}-${pad(w.day)}T${pad(w.hour)}:${pad(w.minute)}:${pad(w.second)}${zone}`;
}
