// The real service's habits that the spec does not show, each off unless asked for, so that our
// client's tests can meet them over real HTTP. Pure: names, checks, windows and wire transforms.

/** Every quirk with the one line docs/sandbox.md and `--help` show for it. */
export const QUIRK_DESCRIPTIONS = {
  completed: 'a finished job says status `completed` instead of `success`',
  waiting: 'a job not yet processing says status `WAITING` instead of `pending`',
  'string-numbers':
    'every number in an answer is a numeric string (`"code": "0"`), and `msg` of a success is null',
  'per-item-expiry': '`link_expired_at` and `duration` sit on each result item instead of the job record',
  'retry-after': 'about 15% of API requests get HTTP 429 `Retry-After: 1`, code 429; nothing is charged',
  'detail-404-window':
    'jobs/detail answers 404 for a new job during its first 3 s (x speed, at least 300 ms)',
  'link-403': 'the first download of each file answers 403; the next jobs/detail re-signs the link',
  'success-before-json': 'a job first says `success` with `json: null` for 1-2 s (x speed, at least 300 ms)',
  gzip: 'JSON answers are gzip-compressed when the request accepts gzip',
  bom: 'JSON answers start with a UTF-8 byte order mark',
  'wrong-extension': 'result links end in `.png` whatever the file is, and video items are typed `image`',
  'code-in-200': 'about 10% of submissions get HTTP 200 with `{code: 500, msg: "busy"}`; nothing is charged',
  'request-id': 'every envelope carries a `request_id` (a UUID)',
} as const;

export type Quirk = keyof typeof QUIRK_DESCRIPTIONS;
export const QUIRKS = Object.keys(QUIRK_DESCRIPTIONS) as Quirk[];

/** Share of authenticated API requests answered 429 under `retry-after`. */
export const RETRY_AFTER_SHARE = 0.15;
/** Share of submissions answered `{code: 500, msg: "busy"}` under `code-in-200`. */
export const CODE_IN_200_SHARE = 0.1;

/**
 * Windows scale with the speed like job timing, but keep a floor: at speed 0 a window of 0 ms
 * could never be seen, and a quirk nobody can meet tests nothing.
 */
const WINDOW_FLOOR_MS = 300;

/** How long jobs/detail pretends a new job does not exist, under `detail-404-window`. */
export function detail404WindowMs(speed: number): number {
  return Math.max(WINDOW_FLOOR_MS, 3000 * speed);
}

/** How long a finished job says `success` without its results, under `success-before-json`; 1-2 s by the job's seed. */
export function successBeforeJsonMs(speed: number, jobSeed: number): number {
  return Math.max(WINDOW_FLOOR_MS, (1000 + (jobSeed % 1000)) * speed);
}

export type QuirksCheck = { ok: true; quirks: Set<Quirk> } | { ok: false; issue: string };

/** Reads `a,b,c` or `all` (or a list or set of names); an unknown name is refused with the known ones. */
export function parseQuirks(input: string | Iterable<string>): QuirksCheck {
  const names = typeof input === 'string' ? input.split(',') : [...input];
  const quirks = new Set<Quirk>();
  const unknown: string[] = [];
  for (const raw of names) {
    const name = raw.trim();
    if (name === '') continue;
    if (name === 'all') for (const quirk of QUIRKS) quirks.add(quirk);
    else if (name in QUIRK_DESCRIPTIONS) quirks.add(name as Quirk);
    else unknown.push(JSON.stringify(name));
  }
  if (unknown.length > 0) {
    return {
      ok: false,
      issue: `unknown quirk ${unknown.join(', ')}; known quirks are: ${QUIRKS.join(', ')}, or all`,
    };
  }
  return { ok: true, quirks };
}

/** Every number in a JSON value turned into its decimal string, as `string-numbers` answers. */
export function stringNumbers(value: unknown): unknown {
  if (typeof value === 'number') return String(value);
  if (Array.isArray(value)) return value.map(stringNumbers);
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, v]) => [key, stringNumbers(v)]));
  }
  return value;
}

/** True when an Accept-Encoding header lets the answer be gzip; `gzip;q=0` refuses it even beside `*`. */
export function acceptsGzip(header: string | undefined): boolean {
  if (!header) return false;
  const weights = new Map<string, number>();
  for (const part of header.split(',')) {
    const [name = '', ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    const q = params.find((p) => p.startsWith('q='));
    weights.set(name, q === undefined ? 1 : Number(q.slice(2)));
  }
  const weight = weights.get('gzip') ?? weights.get('x-gzip') ?? weights.get('*') ?? 0;
  return weight > 0;
}
