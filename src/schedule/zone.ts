// Wall-clock views of an instant in an IANA time zone, for log lines people read and for telling
// whether a moment is near a daylight-saving change. Intl only: no time library of our own.

const formats = new Map<string, Intl.DateTimeFormat>();

function formatFor(timeZone: string): Intl.DateTimeFormat {
  let format = formats.get(timeZone);
  if (format === undefined) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      hourCycle: 'h23',
    });
    formats.set(timeZone, format);
  }
  return format;
}

interface Wall {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

function wallOf(at: Date, timeZone: string): Wall {
  const parts: Record<string, number> = {};
  for (const part of formatFor(timeZone).formatToParts(at)) {
    if (part.type !== 'literal') parts[part.type] = Number(part.value);
  }
  return {
    year: parts.year ?? 0,
    month: parts.month ?? 1,
    day: parts.day ?? 1,
    hour: parts.hour ?? 0,
    minute: parts.minute ?? 0,
    second: parts.second ?? 0,
  };
}

/** Minutes the zone is ahead of UTC at `at` (Berlin: 60 in winter, 120 in summer). */
export function offsetMinutes(at: Date, timeZone: string): number {
  const w = wallOf(at, timeZone);
  const wallAsUtc = Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second);
  const whole = Math.floor(at.getTime() / 1000) * 1000;
  return Math.round((wallAsUtc - whole) / 60_000);
}

const pad = (n: number, width = 2) => String(Math.abs(n)).padStart(width, '0');

/** `2026-03-29T03:00:00+02:00`: the wall time people expect, with the offset that makes it exact. */
export function formatInZone(at: Date, timeZone: string): string {
  const w = wallOf(at, timeZone);
  const offset = offsetMinutes(at, timeZone);
  const sign = offset < 0 ? '-' : '+';
  const zone = `${sign}${pad(Math.trunc(offset / 60))}:${pad(offset % 60)}`;
  return `${pad(w.year, 4)}-${pad(w.month)}-${pad(w.day)}T${pad(w.hour)}:${pad(w.minute)}:${pad(w.second)}${zone}`;
}
