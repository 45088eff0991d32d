// The long-lived loop of `mediabatch schedule`: one timer per manifest, one run at a time per
// manifest, across processes too. A firing is claimed by moving the manifest's schedule row to that
// slot in one conditional statement, so of any number of schedulers on one state (SQLite or
// PostgreSQL) exactly one owns each slot; the manifest's `schedule:` lease then keeps runs one at a time.
// The claim names its holder and lives while the holder beats, until the slot's run is made: a claimer
// killed in between leaves a claim that another scheduler takes over, so the slot still gets its run.

import { EventEmitter } from 'node:events';
import { holderIsDead, type ScheduleRecord, type Store } from '../store/index.js';
import type { Logger } from '../util/log.js';
import type { CronSchedule } from './next.js';
import { type DueDecision, dueFiring, resumePoint } from './policy.js';
import type { Timers } from './timers.js';
import { formatInZone } from './zone.js';

export interface ManifestSchedule {
  /** Absolute: the key of the schedule row, the lease and the ledger's per-manifest spend. */
  path: string;
  /** How the user named the manifest (the path as typed), for output. */
  label: string;
  schedule: CronSchedule;
}

export interface Firing {
  manifestPath: string;
  /** The slot that came due: the run id is rendered at this time, so every scheduler renders the same id. */
  at: Date;
  /** A catch-up of a slot missed while not running. */
  late: boolean;
  /** Hand these to the run as its io.signals: the scheduler forwards SIGTERM/SIGINT to it. */
  signals: EventEmitter;
  /** Aborted when the scheduler stops: a run not started yet must not start. */
  stopping: AbortSignal;
  /**
   * Call once the firing's run exists in the state (created, or an unfinished one resumed): the firing is
   * recorded with it (status shows it) and said. A firing that ends without calling this made no run: cut
   * by a stop, it is given back, so it is not counted as fired.
   */
  started(runId: string): void;
}

export type FiringOutcome =
  | 'finished'
  | 'failed'
  | 'refused'
  | 'interrupted'
  | 'not-started'
  | 'invalid'
  | 'unauthorized'
  | 'error';

export interface FiringResult {
  outcome: FiringOutcome;
  runId?: string;
  /** One line: what happened and, when it went wrong, what to do. */
  message: string;
}

export interface SchedulerDeps {
  /** The scheduler's own connection; its clock should be `now`. */
  store: Store;
  now: () => Date;
  timers: Timers;
  /** Runs one firing: preflight, the run, its report. Never prompts. */
  fire: (firing: Firing) => Promise<FiringResult>;
  logger: Logger;
  /** Plain lines for a person reading stdout or the journal. */
  out: (line: string) => void;
  /** Lease holder of this process, `pid@host#nonce`. */
  holder: string;
}

export interface SchedulerOptions {
  /** Run the latest firing missed while not running (or asleep); never the older ones. */
  catchUp: boolean;
  /** A firing this late still counts as on time. Default 60 s. */
  graceMs?: number;
  /** The `schedule:` lease lives this long without a heartbeat. Default 60 s. */
  leaseTtlMs?: number;
  /**
   * Longest single wait. Node's timers run on a clock that stops while the machine sleeps, so a
   * long wait would wake hours late after a suspend; short waits re-read the wall clock. Default 60 s.
   */
  maxSleepMs?: number;
}

export interface StopSummary {
  /** Runs that the stop interrupted: resumable with the same run id. */
  interrupted: string[];
}

/** The lease that keeps two schedulers from firing one manifest at once. */
export function scheduleLeaseName(manifestPath: string): string {
  return `schedule:${manifestPath}`;
}

interface Running {
  runId?: string;
  signals: EventEmitter;
  done: Promise<void>;
  heartbeat?: unknown;
  /** A stop that came before the run listened for signals; delivered when it starts listening. */
  pendingSignal?: 'SIGTERM' | 'SIGINT';
  /**
   * The manifest's last firing before this one claimed its slot: where a cut firing gives it back to.
   * Undefined for a claim taken over, whose earlier firing is not known: a cut one lets its claim lapse.
   */
  before?: Date | null;
  /** The slot, whose claim the heartbeat renews until the run is made. */
  at: Date;
}

interface Entry {
  m: ManifestSchedule;
  /** Every firing up to here was handled. */
  since: Date;
  nextAt: Date;
  timer?: unknown;
  running?: Running;
  /** Looks again at a slot another scheduler claimed, in case it gives it back or its claim lapses (#watchClaim). */
  watch?: unknown;
}

const MAX_TIMER_MS = 2_147_483_647;

export class Scheduler {
  readonly #deps: SchedulerDeps;
  readonly #catchUp: boolean;
  readonly #graceMs: number;
  readonly #leaseTtlMs: number;
  readonly #maxSleepMs: number;
  readonly #entries: Entry[] = [];
  readonly #manifests: readonly ManifestSchedule[];
  readonly #stopping = new AbortController();
  readonly #interrupted: string[] = [];
  #started = false;
  #resolveFinished: (summary: StopSummary) => void = () => {};
  readonly #finished: Promise<StopSummary>;

  constructor(manifests: readonly ManifestSchedule[], deps: SchedulerDeps, opts: SchedulerOptions) {
    this.#manifests = manifests;
    this.#deps = deps;
    this.#catchUp = opts.catchUp;
    this.#graceMs = opts.graceMs ?? 60_000;
    this.#leaseTtlMs = opts.leaseTtlMs ?? 60_000;
    this.#maxSleepMs = Math.min(opts.maxSleepMs ?? 60_000, MAX_TIMER_MS);
    this.#finished = new Promise((resolve) => {
      this.#resolveFinished = resolve;
    });
  }

  get stopped(): boolean {
    return this.#stopping.signal.aborted;
  }

  /** Arms every manifest's timer; fires at once a firing that is due now (or, with catch-up, the latest missed). */
  start(): void {
    if (this.#started) throw new Error('scheduler: already started');
    this.#started = true;
    const now = this.#deps.now();
    for (const m of this.#manifests) {
      const record = this.#deps.store.schedules.getSchedule(m.path);
      const due = this.#due(m.schedule, this.#resumeFrom(record, now), now);
      const entry: Entry = { m, since: now, nextAt: m.schedule.next(now) };
      this.#entries.push(entry);
      this.#deps.store.schedules.setNextFire(m.path, entry.nextAt);
      this.#say(
        'info',
        {
          manifest: m.path,
          schedule: m.schedule.expression,
          timezone: m.schedule.timezone,
          next_fire_at: entry.nextAt,
        },
        `${m.label}: "${m.schedule.expression}" in ${m.schedule.timezone}, next firing ${this.#fmt(m, entry.nextAt)}`,
      );
      this.#act(entry, due, 'while mediabatch schedule was not running');
      this.#watchLiveClaim(entry, record, now);
      this.#arm(entry);
    }
  }

  /**
   * Started while another scheduler's claim on a slot still on time is live (it measures the inputs, plans):
   * that slot is watched as if this one had found it claimed at its time, so that it is fired here if the
   * claimer dies before making its run (a replica restarted, or started late, beside one killed).
   */
  #watchLiveClaim(entry: Entry, record: ScheduleRecord | undefined, now: Date): void {
    const at = record?.lastFiredAt;
    const claim = record?.claim;
    if (at == null || claim === undefined || entry.watch !== undefined) return;
    if (claim.holder === this.#deps.holder || this.#claimLapsed(claim, now)) return;
    if (now.getTime() - at.getTime() > this.#graceMs) return;
    this.#watchClaim(entry, at);
  }

  /** Stops firing; running runs get the signal and stop cleanly. A second call passes the signal on again. */
  stop(signal: 'SIGTERM' | 'SIGINT' = 'SIGTERM'): void {
    const running = this.#entries.flatMap((e) => (e.running ? [e.running] : []));
    if (!this.stopped) {
      this.#stopping.abort();
      for (const entry of this.#entries) this.#disarm(entry);
      this.#say(
        'info',
        { signal, running: running.length },
        running.length === 0
          ? 'Stopping: no more firings.'
          : `Stopping: no more firings; waiting for ${running.length} running run(s) to stop cleanly (signal again to stop at once)`,
      );
    }
    for (const run of running) this.#signal(run, signal);
    this.#checkFinished();
  }

  /** Resolves once stopped and every run this scheduler started has ended. */
  finished(): Promise<StopSummary> {
    return this.#finished;
  }

  /** Resolves when no run is in progress (for tests and orderly shutdown). */
  async idle(): Promise<void> {
    for (;;) {
      const running = this.#entries.flatMap((e) => (e.running ? [e.running.done] : []));
      if (running.length === 0) return;
      await Promise.all(running);
    }
  }

  /** The next firing of each manifest, as the scheduler sees it now. */
  nextFirings(): Array<{ manifestPath: string; nextAt: Date; running: boolean }> {
    return this.#entries.map((e) => ({ manifestPath: e.m.path, nextAt: e.nextAt, running: !!e.running }));
  }

  /**
   * Where this scheduler takes over: after the last firing, unless that firing's claim outlived its holder
   * (killed before making the run), which leaves the slot due again: fired if still on time (or caught
   * up), said missed if not, as a slot given back is.
   */
  #resumeFrom(record: ScheduleRecord | undefined, now: Date): Date {
    if (record?.lastFiredAt && record.claim !== undefined && this.#claimLapsed(record.claim, now))
      return new Date(record.lastFiredAt.getTime() - 1);
    return resumePoint(record, now);
  }

  /** Another's claim that its holder no longer keeps: expired, or its process gone from this machine. */
  #claimLapsed(claim: NonNullable<ScheduleRecord['claim']>, now: Date): boolean {
    if (claim.holder === this.#deps.holder) return false;
    return claim.expiresAt.getTime() <= now.getTime() || holderIsDead(claim.holder);
  }

  #due(schedule: CronSchedule, since: Date, now: Date): DueDecision {
    return dueFiring({ schedule, since, now, catchUp: this.#catchUp, graceMs: this.#graceMs });
  }

  #arm(entry: Entry): void {
    if (this.stopped) return;
    const wait = Math.max(0, Math.min(entry.nextAt.getTime() - this.#deps.now().getTime(), this.#maxSleepMs));
    entry.timer = this.#deps.timers.setTimeout(() => this.#wake(entry), wait);
  }

  #disarm(entry: Entry): void {
    if (entry.timer !== undefined) this.#deps.timers.clearTimeout(entry.timer);
    entry.timer = undefined;
    if (entry.watch !== undefined) this.#deps.timers.clearTimeout(entry.watch);
    entry.watch = undefined;
  }

  #wake(entry: Entry): void {
    entry.timer = undefined;
    if (this.stopped) return;
    try {
      const now = this.#deps.now();
      if (now.getTime() >= entry.nextAt.getTime()) {
        const due = this.#due(entry.m.schedule, entry.since, now);
        entry.since = now;
        entry.nextAt = entry.m.schedule.next(now);
        this.#deps.store.schedules.setNextFire(entry.m.path, entry.nextAt);
        this.#act(entry, due, 'while the machine slept or the process stalled');
      }
    } catch (error) {
      // The scheduler outlives a locked or failing database: the next wake tries again.
      this.#deps.logger.error({ err: error, manifest: entry.m.path }, 'scheduler wake failed');
      this.#deps.out(`${entry.m.label}: ${messageOf(error)}`);
    }
    this.#arm(entry);
  }

  #act(entry: Entry, due: DueDecision, missedWhy: string): void {
    if (due.kind === 'missed') {
      this.#say(
        'warn',
        { manifest: entry.m.path, missed_at: due.latest, next_fire_at: entry.nextAt },
        `${entry.m.label}: missed the firing due ${this.#fmt(entry.m, due.latest)} ${missedWhy}; not replayed (--catch-up runs the latest missed firing); next firing ${this.#fmt(entry.m, entry.nextAt)}`,
      );
    } else if (due.kind === 'fire') this.#fire(entry, due.at, due.late);
  }

  #fire(entry: Entry, at: Date, late: boolean): void {
    const { store, holder } = this.#deps;
    const path = entry.m.path;
    // The slot is claimed in the database before anything else, not decided from a read: of any number
    // of schedulers exactly one owns it, and that one fires it or says why it skipped it.
    const before = store.schedules.getSchedule(path)?.lastFiredAt ?? null;
    const claim = { firedAt: at, nextFireAt: entry.nextAt, holder, ttlMs: this.#leaseTtlMs };
    if (store.schedules.claimFiring(path, claim)) {
      this.#fireClaimed(entry, { at, late, before });
      return;
    }
    if (this.#takeOver(entry, at)) return;
    this.#say(
      'info',
      { manifest: path, fire_at: at },
      `${entry.m.label}: the firing due ${this.#fmt(entry.m, at)} was already handled by another mediabatch schedule`,
    );
    this.#watchClaim(entry, at);
  }

  /**
   * The slot's claim outlived its holder (killed before it made the slot's run): taken over in one
   * conditional statement, so one scheduler of any number fires it. False when the claim is not lapsed,
   * or another took it first.
   */
  #takeOver(entry: Entry, at: Date): boolean {
    const { store, holder } = this.#deps;
    const path = entry.m.path;
    const now = this.#deps.now();
    const record = store.schedules.getSchedule(path);
    const claim = record?.claim;
    if (record?.lastFiredAt?.getTime() !== at.getTime() || claim === undefined) return false;
    if (!this.#claimLapsed(claim, now)) return false;
    const gone = holderIsDead(claim.holder);
    const taken = store.schedules.takeOverFiring(path, {
      firedAt: at,
      from: claim.holder,
      fromGone: gone,
      holder,
      ttlMs: this.#leaseTtlMs,
    });
    if (!taken) return false;
    this.#say(
      'warn',
      { manifest: path, fire_at: at, claimed_by: claim.holder },
      `${entry.m.label}: the firing due ${this.#fmt(entry.m, at)} was claimed by ${claim.holder}, which ${gone ? 'is gone' : 'let its claim expire'} without making its run: taking it`,
    );
    const late = now.getTime() - at.getTime() > this.#graceMs;
    this.#fireClaimed(entry, { at, late, before: undefined }, claim.holder);
    return true;
  }

  /**
   * A slot this scheduler owns: fired, or skipped with the reason (the claim settled then). `from`: the
   * holder of a claim taken over, whose schedule lease is as stale as its claim.
   */
  #fireClaimed(
    entry: Entry,
    slot: { at: Date; late: boolean; before: Date | null | undefined },
    from?: string,
  ): void {
    const { store, holder } = this.#deps;
    const { at } = slot;
    const path = entry.m.path;
    if (entry.running) {
      const which = entry.running.runId ? ` (${entry.running.runId})` : '';
      this.#skip(entry, at, `the previous run${which} is still going`);
      return;
    }
    const leaseName = scheduleLeaseName(path);
    let lease = store.leases.acquireLease(leaseName, holder, this.#leaseTtlMs);
    if (!lease.acquired && (lease.holder === from || holderIsDead(lease.holder))) {
      // kill -9 left the lease behind with the claim: the slot must not wait for it to expire.
      store.leases.releaseLease(leaseName, lease.holder);
      lease = store.leases.acquireLease(leaseName, holder, this.#leaseTtlMs);
    }
    if (!lease.acquired) {
      this.#skip(entry, at, `another mediabatch schedule (${lease.holder}) is running this manifest`);
      return;
    }
    let launch = false;
    try {
      const going = runGoing(store, path, this.#deps.now());
      if (going !== undefined) this.#skip(entry, at, `its run ${going} is still going`);
      else launch = true;
    } finally {
      if (!launch) store.leases.releaseLease(leaseName, holder);
    }
    if (launch) this.#launch(entry, slot);
  }

  /**
   * Another scheduler holds this slot's claim. Stopped before its run is made, it gives the slot back; killed,
   * it leaves its claim to lapse. This one looks again now and then: it fires a slot given back while the
   * slot is on time, and takes over a lapsed claim, until the claim is settled (the run made, the slot
   * skipped, the firing ended) or the next slot comes, which supersedes it.
   */
  #watchClaim(entry: Entry, at: Date): void {
    if (entry.watch !== undefined) this.#deps.timers.clearTimeout(entry.watch);
    // A read of one row: often enough that a claimer killed on this machine is replaced within seconds.
    const every = Math.max(1, Math.min(this.#graceMs / 6, this.#maxSleepMs, 2_000));
    const look = () => {
      entry.watch = undefined;
      const now = this.#deps.now();
      if (this.stopped || now.getTime() >= entry.nextAt.getTime()) return;
      try {
        const record = this.#deps.store.schedules.getSchedule(entry.m.path);
        const last = record?.lastFiredAt;
        if (last === undefined || last === null || last.getTime() < at.getTime()) {
          if (now.getTime() - at.getTime() > this.#graceMs) return;
          this.#say(
            'info',
            { manifest: entry.m.path, fire_at: at },
            `${entry.m.label}: the firing due ${this.#fmt(entry.m, at)} was given back before its run was made: taking it`,
          );
          this.#fire(entry, at, false);
          return;
        }
        if (last.getTime() > at.getTime() || record?.claim === undefined) return;
        if (this.#takeOver(entry, at)) return;
      } catch (error) {
        this.#deps.logger.error({ err: error, manifest: entry.m.path }, 'could not look at the firing again');
      }
      entry.watch = this.#deps.timers.setTimeout(look, every);
    };
    entry.watch = this.#deps.timers.setTimeout(look, every);
  }

  #skip(entry: Entry, at: Date, why: string): void {
    this.#settle(entry, at);
    this.#say(
      'warn',
      { manifest: entry.m.path, fire_at: at, reason: why, next_fire_at: entry.nextAt },
      `${entry.m.label}: skipped the firing due ${this.#fmt(entry.m, at)}: ${why}; next firing ${this.#fmt(entry.m, entry.nextAt)}`,
    );
  }

  /** The slot this scheduler claimed was handled without a run (skipped, refused, failed): nobody takes it over. */
  #settle(entry: Entry, at: Date): void {
    try {
      this.#deps.store.schedules.settleClaim(entry.m.path, { firedAt: at, holder: this.#deps.holder });
    } catch (error) {
      this.#deps.logger.error({ err: error, manifest: entry.m.path }, 'could not settle the firing');
    }
  }

  #launch(entry: Entry, slot: { at: Date; late: boolean; before: Date | null | undefined }): void {
    const { store, logger } = this.#deps;
    const { at, late } = slot;
    const path = entry.m.path;
    const signals = new EventEmitter();
    const running: Running = {
      signals,
      done: Promise.resolve(),
      at,
      ...(slot.before !== undefined && { before: slot.before }),
    };
    signals.on('newListener', (event: string | symbol) => {
      const pending = running.pendingSignal;
      if (pending !== undefined && event === pending) {
        running.pendingSignal = undefined;
        // newListener fires before the listener is added.
        queueMicrotask(() => signals.emit(pending));
      }
    });
    entry.running = running;
    this.#heartbeat(entry, running);
    const firing: Firing = {
      manifestPath: path,
      at,
      late,
      signals,
      stopping: this.#stopping.signal,
      started: (runId) => {
        running.runId = runId;
        try {
          store.schedules.recordFiring(path, { firedAt: at, runId, nextFireAt: entry.nextAt });
        } catch (error) {
          logger.error({ err: error, manifest: path, run: runId }, 'could not record the firing');
        }
        // Said once the run exists: a stop before this leaves no line claiming a firing that made nothing.
        this.#say(
          'info',
          { manifest: path, fire_at: at, late, run: runId },
          late
            ? `${entry.m.label}: catching up the firing due ${this.#fmt(entry.m, at)}: run ${runId}`
            : `${entry.m.label}: firing (due ${this.#fmt(entry.m, at)}): run ${runId}`,
        );
      },
    };
    running.done = this.#deps
      .fire(firing)
      .catch((error): FiringResult => ({ outcome: 'error', message: messageOf(error) }))
      .then((result) => this.#ended(entry, running, at, result));
  }

  #heartbeat(entry: Entry, running: Running): void {
    const leaseName = scheduleLeaseName(entry.m.path);
    const beat = () => {
      if (entry.running !== running) return;
      try {
        // The claim lives while the run is not made: a scheduler killed before that leaves it to lapse.
        const claim = { firedAt: running.at, holder: this.#deps.holder, ttlMs: this.#leaseTtlMs };
        if (running.runId === undefined && !this.#deps.store.schedules.renewClaim(entry.m.path, claim)) {
          this.#deps.logger.warn(
            { manifest: entry.m.path, fire_at: running.at },
            'the claim of the firing lapsed and was taken over (was the process suspended?); its run keeps its own lease',
          );
        }
        if (!this.#deps.store.leases.renewLease(leaseName, this.#deps.holder, this.#leaseTtlMs)) {
          this.#deps.logger.warn(
            { manifest: entry.m.path },
            'the schedule lease expired and was taken (was the process suspended?); the run keeps its own lease',
          );
        }
      } catch (error) {
        this.#deps.logger.error({ err: error, manifest: entry.m.path }, 'could not renew the schedule lease');
      }
      running.heartbeat = this.#deps.timers.setTimeout(beat, this.#leaseTtlMs / 4);
    };
    running.heartbeat = this.#deps.timers.setTimeout(beat, this.#leaseTtlMs / 4);
  }

  #ended(entry: Entry, running: Running, at: Date, result: FiringResult): void {
    const { store, holder } = this.#deps;
    if (running.heartbeat !== undefined) this.#deps.timers.clearTimeout(running.heartbeat);
    entry.running = undefined;
    try {
      store.leases.releaseLease(scheduleLeaseName(entry.m.path), holder);
    } catch (error) {
      this.#deps.logger.error({ err: error, manifest: entry.m.path }, 'could not release the schedule lease');
    }
    if (running.runId === undefined && this.stopped) {
      this.#giveBack(entry, running, at);
      this.#checkFinished();
      return;
    }
    // Handled: its run made (the claim settled then, unless that record failed), or none (refused, invalid,
    // failed). Nobody is to take it over.
    this.#settle(entry, at);
    const runId = result.runId ?? running.runId;
    if (result.outcome === 'interrupted' && this.stopped) this.#interrupted.push(runId ?? entry.m.path);
    const level = LEVEL[result.outcome];
    const what = runId ? `run ${runId} ` : '';
    // `run` words its refusals "refused: …"; say it once.
    const message = result.message.startsWith(`${result.outcome}: `)
      ? result.message.slice(result.outcome.length + 2)
      : result.message;
    this.#say(
      level,
      { manifest: entry.m.path, fire_at: at, run: runId, outcome: result.outcome },
      `${entry.m.label}: ${what}${result.outcome}: ${message}`,
    );
    if (!this.stopped) {
      this.#say(
        'info',
        { manifest: entry.m.path, next_fire_at: entry.nextAt },
        `${entry.m.label}: next firing ${this.#fmt(entry.m, entry.nextAt)}`,
      );
    }
    this.#checkFinished();
  }

  /**
   * A firing the stop cut before its run was made: the slot is given back (the schedule row as it was before
   * the claim, unless someone moved it since), so a scheduler started again fires it with --catch-up, or says
   * it was missed, and no run is said to have happened.
   */
  #giveBack(entry: Entry, running: Running, at: Date): void {
    const path = entry.m.path;
    const { store, holder } = this.#deps;
    try {
      // A claim taken over does not know the firing before it: it lapses now, for another to take.
      if (running.before === undefined) store.schedules.expireClaim(path, { firedAt: at, holder });
      else store.schedules.unclaimFiring(path, { firedAt: at, before: running.before });
    } catch (error) {
      this.#deps.logger.error({ err: error, manifest: path }, 'could not give the firing back');
    }
    this.#say(
      'info',
      { manifest: path, fire_at: at, outcome: 'not-started' },
      `${entry.m.label}: the firing due ${this.#fmt(entry.m, at)} was stopped before its run was made: not counted as fired`,
    );
  }

  #signal(running: Running, signal: 'SIGTERM' | 'SIGINT'): void {
    if (running.signals.listenerCount(signal) > 0) running.signals.emit(signal);
    else running.pendingSignal = signal;
  }

  #checkFinished(): void {
    if (this.stopped && this.#entries.every((e) => !e.running)) {
      this.#resolveFinished({ interrupted: [...this.#interrupted] });
    }
  }

  #fmt(m: ManifestSchedule, at: Date): string {
    return formatInZone(at, m.schedule.timezone);
  }

  #say(level: 'info' | 'warn' | 'error', fields: Record<string, unknown>, line: string): void {
    this.#deps.logger[level](fields, line);
    this.#deps.out(line);
  }
}

const LEVEL: Record<FiringOutcome, 'info' | 'warn' | 'error'> = {
  finished: 'info',
  failed: 'warn',
  refused: 'warn',
  interrupted: 'warn',
  'not-started': 'info',
  invalid: 'error',
  unauthorized: 'error',
  error: 'error',
};

/** A run of the manifest driven right now by anyone (a `run` by hand included): its run lease is live. */
function runGoing(store: Store, manifestPath: string, now: Date): string | undefined {
  for (const run of store.runs.listRuns({ manifestPath })) {
    if (run.state !== 'running') continue;
    const lease = store.leases.getLease(`run:${run.id}`);
    if (lease && lease.expiresAt.getTime() > now.getTime()) return run.id;
  }
  return undefined;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
