// `{{date}}` and `{{datetime}}` as the manifest's timezone sees `now` (UTC when it names none), so that a
// cron run at 01:00 in Tokyo is dated by Tokyo's calendar.

export function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

export interface Stamp {
  /** YYYY-MM-DD */
  date: string;
  /** YYYY-MM-DDTHHMMSS, without colons so it can name files and run ids. */
  datetime: string;
}

export function stampOf(now: Date, timeZone = 'UTC'): Stamp {
  const format = new Intl.DateTimeFormat('en-US', {
    timeZone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
  });
  const parts: Record<string, string> = {};
  for (const part of format.formatToParts(now)) parts[part.type] = part.value;
  const year = (parts.year ?? '').padStart(4, '0');
  const date = `${year}-${parts.month}-${parts.day}`;
  return { date, datetime: `${date}T${parts.hour}${parts.minute}${parts.second}` };
}
