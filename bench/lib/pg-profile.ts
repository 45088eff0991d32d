// Where a PostgreSQL bench's time goes: CPU seconds of the processes taking part (read from /proc, so
// the figure holds on a machine other work shares), what the database's sessions wait on (sampled from
// pg_stat_activity), and the client's round trips to the server (counted on libpq's binding).
import { readdirSync, readFileSync } from 'node:fs';
import { PgDb } from '../../src/store/pg/db.js';
import { onLibpqCalls, waits } from '../../test/helpers/libpq-calls.js';

/** Linux's clock ticks per second of /proc/<pid>/stat's times (`getconf CLK_TCK`). */
const TICKS = 100;

/** The fields of /proc/<pid>/stat after the command's name, which may hold spaces. */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** User + system CPU seconds of a process so far (undefined once it is gone). */
export function cpuSeconds(pid: number): number | undefined {
  const fields = statFields(pid);
  if (fields === undefined) return undefined;
  // utime and stime are the stat file's 14th and 15th fields: the 12th and 13th after the name.
  return (Number(fields[11]) + Number(fields[12])) / TICKS;
}

function allPids(): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number);
}

function cmdline(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  } catch {
    return [];
  }
}

/** The postmaster listening on `port`, and every process it started (backends, checkpointer, …). */
export function postgresPids(port: number): number[] {
  const pids = allPids();
  const master = pids.find((pid) => {
    const args = cmdline(pid);
    const p = args.indexOf('-p');
    return p >= 0 && args[p + 1] === String(port) && /postgres$/.test(args[0] ?? '');
  });
  if (master === undefined) return [];
  return [master, ...pids.filter((pid) => statFields(pid)?.[1] === String(master))];
}

/**
 * CPU seconds each group of processes used between start() and stop(), sampled every 100 ms: a process
 * that ends is counted up to its last sample, one that starts is counted from 0.
 */
export class CpuSampler {
  readonly #groups: Record<string, () => readonly number[]>;
  readonly #first = new Map<number, number>();
  readonly #last = new Map<number, { group: string; seconds: number }>();
  #timer: NodeJS.Timeout | undefined;

  constructor(groups: Record<string, () => readonly number[]>) {
    this.#groups = groups;
  }

  start(): void {
    for (const pids of Object.values(this.#groups)) {
      for (const pid of pids()) {
        const seconds = cpuSeconds(pid);
        if (seconds !== undefined) this.#first.set(pid, seconds);
      }
    }
    this.#sample();
    this.#timer = setInterval(() => this.#sample(), 100);
  }

  #sample(): void {
    for (const [group, pids] of Object.entries(this.#groups)) {
      for (const pid of pids()) {
        const seconds = cpuSeconds(pid);
        if (seconds !== undefined) this.#last.set(pid, { group, seconds });
      }
    }
  }

  /** CPU seconds per group. */
  stop(): Record<string, number> {
    this.#sample();
    clearInterval(this.#timer);
    const out: Record<string, number> = Object.fromEntries(Object.keys(this.#groups).map((g) => [g, 0]));
    for (const [pid, { group, seconds }] of this.#last) {
      out[group] = (out[group] ?? 0) + seconds - (this.#first.get(pid) ?? 0);
    }
    return out;
  }
}

/**
 * What the sessions of one database do, sampled every 50 ms from pg_stat_activity: on the CPU or the disk
 * (`working`), waiting for a lock (`lock:advisory` is the writer lock, `lock:transactionid`/`lock:tuple`
 * another transaction's row), inside a transaction waiting for its client (`client in transaction`), or
 * idle between transactions (`idle`). Each sample counts every session once.
 */
export class WaitSampler {
  readonly #db: PgDb;
  readonly #counts = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;

  constructor(url: string) {
    this.#db = new PgDb(url);
  }

  start(): void {
    this.#timer = setInterval(() => this.#sample(), 50);
  }

  #sample(): void {
    const rows = this.#db
      .prepare(
        // An advisory lock waited for is named after the run's lock it is (src/store/pg/migrations.ts): a
        // key of hashtextextended is split by pg_locks into two 32-bit halves, the low one in objid.
        `SELECT a.state, a.wait_event_type, a.wait_event,
           (SELECT CASE
              WHEN EXISTS (SELECT 1 FROM runs r WHERE hashtextextended('mediabatch money ' || r.id, 0) & 4294967295 = l.objid::bigint) THEN 'money'
              WHEN EXISTS (SELECT 1 FROM runs r WHERE hashtextextended('mediabatch counts ' || r.id, 0) & 4294967295 = l.objid::bigint) THEN 'counts'
              ELSE 'other' END
            FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted AND l.locktype = 'advisory' LIMIT 1) AS advisory
         FROM pg_stat_activity a
         WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND a.backend_type = 'client backend'`,
      )
      .all() as {
      state: string | null;
      wait_event_type: string | null;
      wait_event: string | null;
      advisory: string | null;
    }[];
    for (const row of rows) {
      const what =
        row.state === 'idle'
          ? 'idle'
          : row.wait_event_type === 'Lock'
            ? `lock:${row.wait_event}${row.advisory ? ` (${row.advisory})` : ''}`
            : row.wait_event_type === 'Client'
              ? 'client in transaction'
              : 'working';
      this.#counts.set(what, (this.#counts.get(what) ?? 0) + 1);
    }
  }

  /** Share of the session samples in each state, in %. */
  stop(): Record<string, number> {
    clearInterval(this.#timer);
    this.#db.close();
    const total = [...this.#counts.values()].reduce((n, c) => n + c, 0) || 1;
    return Object.fromEntries(
      [...this.#counts].sort((a, b) => b[1] - a[1]).map(([k, c]) => [k, Math.round((c * 1000) / total) / 10]),
    );
  }
}

type Counted = 'exec' | 'execPrepared' | 'prepare' | 'pipelined';

/**
 * Counts this process's round trips to the server (`total`), by kind: a synchronous statement (exec,
 * execPrepared, prepare), a statement sent in a pipeline (`pipelined`, no wait of its own), and the
 * transactions begun. Installed once, before any connection is opened.
 */
export function countRoundTrips(): () => Record<Counted | 'transactions' | 'total', number> {
  const counts: Record<Counted | 'transactions' | 'total', number> = {
    total: 0,
    exec: 0,
    execPrepared: 0,
    prepare: 0,
    pipelined: 0,
    transactions: 0,
  };
  onLibpqCalls((method, args) => {
    if (waits(method)) counts.total += 1;
    if (method === 'exec' || method === 'execPrepared' || method === 'prepare') counts[method] += 1;
    if (method === 'sendQueryPrepared' || method === 'sendQueryParams') counts.pipelined += 1;
    if (/^\s*BEGIN\b/.test(String(args[0]))) counts.transactions += 1;
  });
  return () => ({ ...counts });
}
