// Options of the sandbox: the defaults, one description per option (shared with the CLI), and the
// checks that both `startSandbox` and `POST /_sandbox/config` apply.
import type { Dispatcher } from 'undici';
import type { PriceTable } from '../catalog/types.js';
import { MediabatchError } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import type { Prober } from '../media/types.js';
import { QUIRKS } from './quirks.js';

/** Sandbox options the user gave that it cannot take (`sandbox: …`, one line): exit 1. */
export class SandboxOptionsError extends MediabatchError {
  override name = 'SandboxOptionsError';
  override readonly exitCode = EXIT.invalid;
}

/** Settings that may change while the sandbox runs (`POST /_sandbox/config`). */
export interface SandboxSettings {
  /** Multiplies every job's duration: 1 is realistic, 0 finishes jobs the next time they are looked at. */
  speed: number;
  /** Share of accepted jobs that end `failed` (and are refunded). */
  failRate: number;
  /** Share of submissions answered 500 before anything is charged. */
  errorRate: number;
  /** Share of submissions that are charged and create a job, but whose answer is a 500 or a dropped connection. */
  chargeThenErrorRate: number;
  /** Delay added to every request, in milliseconds. */
  latencyMs: number;
  /** Lifetime of result links, in seconds from the end of the job. */
  linkTtlSeconds: number;
  /** Bytes added to every video result (an MP4 `free` box): large results, for tests of multipart uploads. */
  videoPaddingBytes: number;
  /** Account discount from 0 to 1: `cost` is the list price times (1 - discount). */
  discount: number;
  /** Tokens available to spend; may be fractional. */
  balance: number;
  /** Tokens the API key may spend per calendar month (UTC); null for no quota. */
  quota: number | null;
  /** Jobs of the account processing at once; the others stay queued. null for no limit. */
  accountConcurrency: number | null;
  /** While true every result link answers 403, fresh ones too: a CDN outage, for tests of unfetched results. */
  refuseDownloads: boolean;
}

export interface SandboxOptions extends Partial<SandboxSettings> {
  /** 0 picks a free port. Default 0. */
  port?: number;
  host?: string;
  apiKey?: string;
  /** Makes ids, faults and failures reproducible; without it, job ids are random UUIDs, unique across starts. */
  seed?: number;
  /** Habits of the real service to imitate (names of QUIRKS, or `all`); none by default. */
  quirks?: readonly string[] | ReadonlySet<string>;
  /** The clock, in epoch milliseconds; jobs advance by it, so tests need no real waiting. */
  now?: () => number;
  prober?: Prober;
  /** Used to deliver callbacks. */
  fetch?: typeof globalThis.fetch;
  dispatcher?: Dispatcher;
  /** List prices; the catalog's defaults when absent. */
  prices?: PriceTable;
  /** Largest request body accepted, in bytes. */
  bodyLimit?: number;
  callbackTimeoutMs?: number;
  /** Pause before each callback retry. */
  callbackRetryDelayMs?: number;
  /** How often jobs are advanced without being polled, so that callbacks are sent on time. */
  tickMs?: number;
  /** One short line per request, for the CLI. */
  log?: (line: string) => void;
  /**
   * A file that keeps every finished job (one JSON line each) and that the next sandbox with the same
   * journal reads back: `run --sandbox` keeps `state/sandbox-jobs.jsonl` beside its state file. None by default.
   */
  journal?: string;
}

export const SANDBOX_DEFAULTS = {
  port: 8787,
  host: '127.0.0.1',
  apiKey: 'sandbox-key',
  seed: 1,
  speed: 1,
  failRate: 0,
  errorRate: 0,
  chargeThenErrorRate: 0,
  latencyMs: 0,
  linkTtlSeconds: 12 * 60 * 60,
  videoPaddingBytes: 0,
  discount: 0,
  balance: 1000,
  quota: null as number | null,
  accountConcurrency: null as number | null,
  refuseDownloads: false,
  quirks: [] as readonly string[],
  bodyLimit: 1024 * 1024,
  callbackTimeoutMs: 3000,
  callbackRetryDelayMs: 1000,
  tickMs: 250,
} as const;

/**
 * The `mediabatch sandbox` flags: `attr` is commander's attribute name for the flag, `option` the
 * SandboxOptions key it sets. Defaults are in SANDBOX_DEFAULTS.
 */
export const SANDBOX_FLAGS = [
  { flag: '--port <n>', attr: 'port', option: 'port', description: 'port to listen on; 0 picks a free port' },
  { flag: '--host <host>', attr: 'host', option: 'host', description: 'address to listen on' },
  {
    flag: '--api-key <key>',
    attr: 'apiKey',
    option: 'apiKey',
    description: 'the bearer key the sandbox accepts',
  },
  {
    flag: '--balance <tokens>',
    attr: 'balance',
    option: 'balance',
    description: 'starting balance in tokens',
  },
  {
    flag: '--quota <tokens>',
    attr: 'quota',
    option: 'quota',
    description: 'monthly quota of the API key in tokens (default: none)',
  },
  {
    flag: '--speed <factor>',
    attr: 'speed',
    option: 'speed',
    description: 'job duration multiplier: 1 realistic, 0.1 ten times faster, 0 done at once',
  },
  {
    flag: '--fail-rate <0..1>',
    attr: 'failRate',
    option: 'failRate',
    description: 'share of jobs that end failed (and are refunded)',
  },
  {
    flag: '--error-rate <0..1>',
    attr: 'errorRate',
    option: 'errorRate',
    description: 'share of submissions answered 500 before anything is charged',
  },
  {
    flag: '--charge-then-error-rate <0..1>',
    attr: 'chargeThenErrorRate',
    option: 'chargeThenErrorRate',
    description: 'share of submissions charged but answered 500 or with a dropped connection',
  },
  {
    flag: '--latency <ms>',
    attr: 'latency',
    option: 'latencyMs',
    description: 'delay added to every request, in ms',
  },
  {
    flag: '--seed <n>',
    attr: 'seed',
    option: 'seed',
    description: 'seed of every random choice: same seed, same behaviour',
  },
  {
    flag: '--link-ttl <seconds>',
    attr: 'linkTtl',
    option: 'linkTtlSeconds',
    description: 'lifetime of result links in seconds',
  },
  {
    flag: '--video-padding <bytes>',
    attr: 'videoPadding',
    option: 'videoPaddingBytes',
    description: 'bytes added to every video result (an MP4 free box), for large results',
  },
  {
    flag: '--discount <0..1>',
    attr: 'discount',
    option: 'discount',
    description: 'account discount: cost = list price x (1 - discount)',
  },
  {
    flag: '--account-concurrency <n>',
    attr: 'accountConcurrency',
    option: 'accountConcurrency',
    description: 'jobs processing at once; the others stay pending (default: no limit)',
  },
  {
    flag: '--quirks <list>',
    attr: 'quirks',
    option: 'quirks',
    description: `habits of the real service to imitate, comma-separated, or all: ${QUIRKS.join(', ')}`,
  },
] as const;

export type SandboxFlagAttr = (typeof SANDBOX_FLAGS)[number]['attr'];

export type SettingsCheck =
  | { ok: true; settings: Partial<SandboxSettings> }
  | { ok: false; issues: string[] };

const RATE_KEYS = ['failRate', 'errorRate', 'chargeThenErrorRate', 'discount'] as const;
const NON_NEGATIVE_KEYS = ['speed', 'latencyMs', 'linkTtlSeconds', 'balance', 'videoPaddingBytes'] as const;

/** Checks a partial settings object from JSON or flags; every problem is reported, not only the first. */
export function checkSettings(input: unknown): SettingsCheck {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return { ok: false, issues: [`settings: must be a JSON object, got ${describe(input)}`] };
  }
  const raw = input as Record<string, unknown>;
  const issues: string[] = [];
  const settings: Partial<SandboxSettings> = {};
  const known = new Set<string>([
    ...RATE_KEYS,
    ...NON_NEGATIVE_KEYS,
    'quota',
    'accountConcurrency',
    'refuseDownloads',
  ]);
  for (const key of Object.keys(raw)) {
    if (!known.has(key)) issues.push(`${key}: unknown setting; known settings are: ${[...known].join(', ')}`);
  }
  for (const key of RATE_KEYS) {
    const value = raw[key];
    if (value === undefined) continue;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > 1) {
      issues.push(`${key}: must be a number from 0 to 1, got ${describe(value)}`);
    } else settings[key] = value;
  }
  for (const key of NON_NEGATIVE_KEYS) {
    const value = raw[key];
    if (value === undefined) continue;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
      issues.push(`${key}: must be a number >= 0, got ${describe(value)}`);
    } else settings[key] = value;
  }
  if (raw.quota !== undefined) {
    const value = raw.quota;
    if (value === null) settings.quota = null;
    else if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
      issues.push(`quota: must be a number >= 0 or null, got ${describe(value)}`);
    } else settings.quota = value;
  }
  if (raw.accountConcurrency !== undefined) {
    const value = raw.accountConcurrency;
    if (value === null) settings.accountConcurrency = null;
    else if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
      issues.push(`accountConcurrency: must be a whole number >= 1 or null, got ${describe(value)}`);
    } else settings.accountConcurrency = value;
  }
  if (raw.refuseDownloads !== undefined) {
    if (typeof raw.refuseDownloads !== 'boolean') {
      issues.push(`refuseDownloads: must be true or false, got ${describe(raw.refuseDownloads)}`);
    } else settings.refuseDownloads = raw.refuseDownloads;
  }
  return issues.length > 0 ? { ok: false, issues } : { ok: true, settings };
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  return String(value);
}
