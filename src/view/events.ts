// Server-sent events: one poller for the whole server looks at cheap signals every POLL_MS (PRAGMA
// data_version, the newest row ids) and, when something moved, reads the counters of each run and
// the tasks finished since the last look, and sends them to every open page. Reads only, so the
// runner in another process is never held up. Its work is bounded: it looks only while a page listens,
// and waits at least TICK_COST_FACTOR times what its last look cost, so that under `run --view` (the
// runner in the same process) an open page takes at most about 5 % of the runner's core.

import type { ServerResponse } from 'node:http';
import { type RunRecord, StoreError, type TaskState } from '../store/index.js';
import { scrub } from '../util/secrets.js';
import { VIEW_API_VERSION, type ViewData } from './data.js';
import { nextExpiry, runWorkers } from './workers.js';

export const POLL_MS = 250;
/** The next look waits at least this many times the last one's cost: 5 % of a core at most. */
const TICK_COST_FACTOR = 20;
const HEARTBEAT_MS = 15_000;
/** At most this many task ids in one `tasks` event (the page refetches when it sees more). */
const TASK_IDS = 200;

export interface ViewEvent {
  event: 'runs' | 'run' | 'tasks' | 'workers' | 'store';
  data: Record<string, unknown>;
}

/** How long the poller waits before it knocks again at a database that did not answer. */
const AWAY_POLL_MS = 1000;

/**
 * The state cannot be read for now (a PostgreSQL server that went away or cannot be reached, a SQLite
 * file locked past its timeout): the page says so, in one line, and reads again when it is back.
 */
export function unreachable(error: unknown): string | undefined {
  if (
    !(error instanceof StoreError) ||
    (error.kind !== 'busy' && error.kind !== 'gone' && error.kind !== 'server')
  )
    return undefined;
  // Without its last full stop: the page and the terminal go on with `: the page reads again…`.
  return (error.message.split('\n')[0]?.trim() ?? error.message).replace(/\.$/, '');
}

export class ChangeFeed {
  readonly #data: ViewData;
  readonly #clients = new Set<ServerResponse>();
  readonly #lastCounts = new Map<string, string>();
  readonly #lastFinished = new Map<string, string>();
  #lastRuns = '';
  #lastSignals = '';
  #timer: NodeJS.Timeout | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  #seq = 0;
  /** After the first look: a run that appears later is new, and all of it is news. */
  #primed = false;
  #stopped = false;
  /** Why the state could not be read at the last look, or undefined while it answers. */
  #away: string | undefined;
  /** Each run's workers as last sent. */
  readonly #lastWorkers = new Map<string, string>();
  /** When a working worker's heartbeat runs out next (ms since the epoch): it is lost from then on. */
  #nextExpiry = Number.POSITIVE_INFINITY;
  readonly #now: () => number;

  readonly #onError: (error: unknown) => void;
  readonly #onAway: (line: string | undefined) => void;

  constructor(
    data: ViewData,
    opts: {
      now?: () => number;
      /** A look that failed for another reason than the database being away: told, and the next look tries again. */
      onError?: (error: unknown) => void;
      /** The database went away (its one line) or is back (undefined). */
      onAway?: (line: string | undefined) => void;
    } = {},
  ) {
    this.#onAway = opts.onAway ?? (() => undefined);
    this.#data = data;
    this.#now = opts.now ?? Date.now;
    this.#onError = opts.onError ?? (() => undefined);
    // A large run's figures caught up in the background: the pages ask again, so they show them.
    data.onFresh = (runId) => {
      const run = data.store.runs.getRun(runId);
      if (run !== undefined) this.#emit([{ event: 'run', data: this.#runEvent(run) }]);
    };
  }

  start(): void {
    this.#look();
    this.#lookLater(POLL_MS);
    this.#heartbeat = setInterval(() => this.#send(': keep-alive\n\n'), HEARTBEAT_MS);
    this.#heartbeat.unref();
  }

  /** The next look: only while a page listens (nobody to tell otherwise), paced by the last one's cost. */
  #lookLater(ms: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      const started = performance.now();
      if (this.#clients.size > 0) this.#look();
      const next = this.#away === undefined ? POLL_MS : AWAY_POLL_MS;
      this.#lookLater(Math.max(next, TICK_COST_FACTOR * (performance.now() - started)));
    }, ms);
    this.#timer.unref();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    clearInterval(this.#heartbeat);
    for (const client of this.#clients) client.end();
    this.#clients.clear();
  }

  /**
   * One look, through a database that may be away: the pages are told once when it goes (a `store`
   * event with its one line) and once when it is back (they read again then).
   */
  #look(): void {
    try {
      this.tick();
    } catch (error) {
      const away = unreachable(error);
      // Our own failure: told, never thrown from the timer, which would end the process (and under
      // `run --view`, the run with it).
      if (away === undefined) {
        this.#onError(error);
        return;
      }
      // Told once when it goes, whatever the next looks say (it went away, then cannot be reached).
      if (this.#away === undefined) {
        this.#emit([{ event: 'store', data: { reachable: false, error: away } }]);
        this.#onAway(away);
      }
      this.#away = away;
      return;
    }
    if (this.#away === undefined) return;
    this.#away = undefined;
    this.#emit([{ event: 'store', data: { reachable: true, error: null } }]);
    this.#onAway(undefined);
  }

  /** Why the state cannot be read now (the last look), or undefined. */
  get away(): string | undefined {
    return this.#away;
  }

  /** Adds a page; it gets every later event (it read the current state through the JSON API). */
  subscribe(res: ServerResponse): void {
    // A page that reconnects while the view closes is let go at once: a held stream would keep the
    // server from closing (its connection never goes idle).
    if (this.#stopped) {
      res.end();
      return;
    }
    this.#clients.add(res);
    res.write(`retry: 1000\n\n`);
    if (this.#away !== undefined) {
      const data = { v: VIEW_API_VERSION, reachable: false, error: this.#away };
      res.write(scrub(`event: store\ndata: ${JSON.stringify(data)}\n\n`));
    }
    res.on('close', () => this.#clients.delete(res));
  }

  get clients(): number {
    return this.#clients.size;
  }

  /**
   * One look: nothing read beyond the signals unless they moved. Returns the events sent. The costly
   * figures of the runs pages asked for are brought up to date on every look (a throttled pass of a
   * large run included), so the last change of a run always shows.
   */
  tick(): ViewEvent[] {
    const signals = this.#data.store.viewReads.changeSignals();
    const key = JSON.stringify(signals);
    if (key === this.#lastSignals) {
      // Nothing written, but a worker whose heartbeat ran out is lost from now on: the panel says so.
      const expired = this.#now() >= this.#nextExpiry;
      const events = expired ? this.#workerChanges(this.#data.store.runs.listRuns()) : [];
      this.#emit(events);
      this.#data.keepUp();
      return events;
    }
    this.#lastSignals = key;
    const events = this.#changes();
    this.#primed = true;
    this.#emit(events);
    this.#data.keepUp();
    return events;
  }

  #emit(events: readonly ViewEvent[]): void {
    for (const e of events) {
      this.#seq++;
      this.#send(
        `id: ${this.#seq}\nevent: ${e.event}\ndata: ${JSON.stringify({ v: VIEW_API_VERSION, ...e.data })}\n\n`,
      );
    }
  }

  #runEvent(run: RunRecord): Record<string, unknown> {
    const head = this.#data.runHead(run);
    const counts = head['by_state'] as Record<TaskState, number>;
    return {
      run: run.id,
      state: head['state'],
      by_state: counts,
      tasks: head['tasks'],
      finished: head['finished'],
      charged: head['charged'],
      refunded: head['refunded'],
      net: head['net'],
    };
  }

  /**
   * A `workers` event for each run whose workers moved (one joined, beat, left or was lost), with all
   * of them: the panel is drawn from it. A run without workers says nothing.
   */
  #workerChanges(runs: readonly RunRecord[]): ViewEvent[] {
    const events: ViewEvent[] = [];
    const now = new Date(this.#now());
    let next = Number.POSITIVE_INFINITY;
    for (const run of runs) {
      const read = runWorkers(this.#data.store, run.id, now);
      next = Math.min(next, nextExpiry(read.workers));
      const key = JSON.stringify(read.workers);
      if (key === (this.#lastWorkers.get(run.id) ?? '[]')) continue;
      this.#lastWorkers.set(run.id, key);
      events.push({ event: 'workers', data: { run: run.id, ...read } });
    }
    this.#nextExpiry = next;
    return events;
  }

  #changes(): ViewEvent[] {
    const store = this.#data.store;
    const events: ViewEvent[] = [];
    const runs = store.runs.listRuns();
    events.push(...this.#workerChanges(runs));
    const runsKey = JSON.stringify(runs.map((r) => [r.id, r.state, r.exitCode, r.finishedAt, r.startedAt]));
    if (runsKey !== this.#lastRuns) {
      this.#lastRuns = runsKey;
      events.push({ event: 'runs', data: { runs: runs.map((r) => r.id) } });
    }
    for (const run of runs) {
      const counts = store.tasks.countTasksByState(run.id);
      const countsKey = JSON.stringify(counts);
      const finishedAfter = this.#lastFinished.get(run.id) ?? (this.#primed ? '' : undefined);
      // A run seen for the first time: its tasks finished so far are what the page read already.
      const finished =
        finishedAfter === undefined ? [] : store.viewReads.finishedSince(run.id, finishedAfter, TASK_IDS + 1);
      const latest = finished.length > TASK_IDS || finishedAfter === undefined;
      const last = latest ? store.viewReads.latestFinish(run.id) : finished.at(-1)?.finishedAt;
      if (last !== undefined) this.#lastFinished.set(run.id, last);
      else if (finishedAfter === undefined) this.#lastFinished.set(run.id, '');
      if (countsKey === this.#lastCounts.get(run.id) && finished.length === 0) continue;
      const first = !this.#lastCounts.has(run.id);
      this.#lastCounts.set(run.id, countsKey);
      if (first && !this.#primed) continue;
      events.push({ event: 'run', data: this.#runEvent(run) });
      if (finished.length > 0) {
        events.push({
          event: 'tasks',
          data: {
            run: run.id,
            tasks: finished.slice(0, TASK_IDS).map((t) => ({ id: t.taskId, state: t.state })),
            more: finished.length > TASK_IDS,
          },
        });
      }
    }
    return events;
  }

  #send(text: string): void {
    // Ids come from manifests: scrubbed like every other answer of the view.
    const clean = scrub(text);
    for (const client of this.#clients) client.write(clean);
  }
}
