import type { Db } from './db.js';
import { StoreError } from './db.js';
import { fromIso, fromIsoOrNull, toIso } from './time.js';
import type { Clock, NewRun, RunRecord, RunState, RunStop } from './types.js';

interface RunRow {
  id: string;
  manifest_path: string;
  manifest_name: string;
  state: RunState;
  exit_code: number | null;
  settings: string;
  callback_token: string | null;
  balance_before: number | null;
  balance_after: number | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  first_started_at: string | null;
  active_ms: number;
  api_base_url: string | null;
  key_fingerprint: string | null;
  stop_reason: string | null;
  stop_message: string | null;
  stopped_at: string | null;
  plan_digest: string | null;
  plan_tasks: number | null;
  plan_storing: number | null;
}

function toRun(row: RunRow): RunRecord {
  return {
    id: row.id,
    manifestPath: row.manifest_path,
    manifestName: row.manifest_name,
    state: row.state,
    exitCode: row.exit_code,
    settings: JSON.parse(row.settings) as unknown,
    callbackToken: row.callback_token,
    balanceBefore: row.balance_before,
    balanceAfter: row.balance_after,
    createdAt: fromIso(row.created_at),
    startedAt: fromIsoOrNull(row.started_at),
    finishedAt: fromIsoOrNull(row.finished_at),
    firstStartedAt: fromIsoOrNull(row.first_started_at),
    activeMs: row.active_ms,
    api:
      row.api_base_url === null
        ? null
        : { baseUrl: row.api_base_url, keyFingerprint: row.key_fingerprint ?? '' },
    planDigest: row.plan_digest,
    planTasks: row.plan_tasks,
    planStoring: row.plan_storing === 1,
    ...(row.stop_reason === null
      ? {}
      : {
          stop: {
            reason: row.stop_reason,
            message: row.stop_message ?? '',
            at: fromIso(row.stopped_at ?? row.finished_at ?? row.created_at),
          },
        }),
  };
}

/** What ends a run (markRunState): `finished` is 1 when `state` is 'finished'. */
type RunEnd = { id: string; state: RunState; finished: 0 | 1; exitCode: number | null; now: string };

export class RunStore {
  readonly #now: Clock;
  readonly #insertRun;
  readonly #selectRun;
  readonly #planStored;
  readonly #selectRuns;
  readonly #selectRunsOfManifest;
  readonly #selectUnfinishedRuns;
  readonly #selectUnfinishedRunOf;
  readonly #markRunStarted;
  readonly #closeLostSession;
  readonly #bindApi;
  readonly #markRunEnded;
  readonly #recordStop;
  readonly #updateBalanceBefore;
  readonly #updateBalanceAfter;
  readonly #updateSettings;
  readonly #updateCallbackToken;
  readonly #updatePlanDigest;

  constructor(db: Db, now: Clock) {
    this.#now = now;
    this.#insertRun = db.prepare<{
      id: string;
      manifestPath: string;
      manifestName: string;
      settings: string;
      callbackToken: string | null;
      apiBaseUrl: string | null;
      keyFingerprint: string | null;
      now: string;
    }>(
      `INSERT INTO runs (id, manifest_path, manifest_name, state, settings, callback_token, created_at, started_at,
         first_started_at, api_base_url, key_fingerprint)
       VALUES (:id, :manifestPath, :manifestName, 'running', :settings, :callbackToken, :now, :now, :now,
         :apiBaseUrl, :keyFingerprint)`,
    );
    this.#selectRun = db.prepare<[string], RunRow>('SELECT * FROM runs WHERE id = ?');
    this.#selectRuns = db.prepare<[], RunRow>('SELECT * FROM runs ORDER BY created_at DESC, id');
    this.#selectRunsOfManifest = db.prepare<[string], RunRow>(
      'SELECT * FROM runs WHERE manifest_path = ? ORDER BY created_at DESC, id',
    );
    this.#selectUnfinishedRuns = db.prepare<[], RunRow>(
      `SELECT * FROM runs WHERE state <> 'finished' ORDER BY created_at DESC, id`,
    );
    // A run refused at preflight charged nothing and owes nothing: only running or interrupted ones count.
    this.#selectUnfinishedRunOf = db.prepare<[string, string], RunRow>(
      `SELECT * FROM runs WHERE manifest_path = ? AND manifest_name = ? AND state IN ('running', 'interrupted')
       ORDER BY created_at DESC, id LIMIT 1`,
    );
    this.#markRunStarted = db.prepare<{ id: string; now: string }>(
      `UPDATE runs SET state = 'running', started_at = :now, first_started_at = coalesce(first_started_at, :now),
         exit_code = NULL, stop_reason = NULL, stop_message = NULL, stopped_at = NULL WHERE id = :id`,
    );
    this.#bindApi = db.prepare<{ id: string; baseUrl: string; keyFingerprint: string; force: number }>(
      `UPDATE runs SET api_base_url = :baseUrl, key_fingerprint = :keyFingerprint
       WHERE id = :id AND (api_base_url IS NULL OR :force = 1)`,
    );
    this.#markRunEnded = db.prepare<RunEnd>(
      // A session's time counts once: only an end that follows a start adds to the active time. `finished`
      // apart from `state`: used both ways, PostgreSQL could not type it (nor the exit code, then).
      `UPDATE runs SET
         active_ms = active_ms + CASE WHEN state = 'running' AND started_at IS NOT NULL
           THEN max(0, CAST(round((julianday(:now) - julianday(started_at)) * 86400000) AS INTEGER)) ELSE 0 END,
         state = :state, finished_at = :now, exit_code = :exitCode,
         stop_reason = CASE WHEN :finished = 1 THEN NULL ELSE stop_reason END,
         stop_message = CASE WHEN :finished = 1 THEN NULL ELSE stop_message END,
         stopped_at = CASE WHEN :finished = 1 THEN NULL ELSE stopped_at END
       WHERE id = :id`,
    );
    // A session that never ended (kill -9, every worker lost) counts up to its last sign of work, and the
    // next one counts from there: the time nobody worked on the run is not active time.
    this.#closeLostSession = db.prepare<{ id: string; until: string }>(
      `UPDATE runs SET
         active_ms = active_ms + max(0, CAST(round((julianday(:until) - julianday(started_at)) * 86400000) AS INTEGER)),
         started_at = :until
       WHERE id = :id AND state = 'running' AND started_at IS NOT NULL AND started_at < :until`,
    );
    // The first reason wins: a second worker stopping for its own reason does not replace it.
    this.#recordStop = db.prepare<{ id: string; reason: string; message: string; now: string }>(
      `UPDATE runs SET stop_reason = :reason, stop_message = :message, stopped_at = :now
       WHERE id = :id AND stop_reason IS NULL`,
    );
    this.#updateBalanceBefore = db.prepare<[number, string]>(
      'UPDATE runs SET balance_before = ? WHERE id = ?',
    );
    this.#updateBalanceAfter = db.prepare<[number, string]>('UPDATE runs SET balance_after = ? WHERE id = ?');
    this.#updateSettings = db.prepare<[string, string]>('UPDATE runs SET settings = ? WHERE id = ?');
    this.#updateCallbackToken = db.prepare<[string, string]>(
      'UPDATE runs SET callback_token = ? WHERE id = ?',
    );
    this.#planStored = db.prepare<[string]>(
      'UPDATE runs SET plan_storing = 0 WHERE id = ? AND plan_storing = 1',
    );
    this.#updatePlanDigest = db.prepare<[string | null, number, number | null, string]>(
      'UPDATE runs SET plan_digest = ?, plan_tasks = ?, plan_storing = ? WHERE id = ?',
    );
  }

  /** Creates a run in state `running`. Throws if the id exists: resume it with `markRunState(id, 'running')`. */
  createRun(run: NewRun): RunRecord {
    if (this.#selectRun.get(run.id) !== undefined) {
      throw new StoreError(`run ${run.id}: already exists: resume it, or choose another run id`);
    }
    this.#insertRun.run({
      id: run.id,
      manifestPath: run.manifestPath,
      manifestName: run.manifestName,
      settings: JSON.stringify(run.settings ?? null),
      callbackToken: run.callbackToken ?? null,
      apiBaseUrl: run.api?.baseUrl ?? null,
      keyFingerprint: run.api?.keyFingerprint ?? null,
      now: toIso(this.#now()),
    });
    return this.#mustGet(run.id);
  }

  getRun(id: string): RunRecord | undefined {
    const row = this.#selectRun.get(id);
    return row === undefined ? undefined : toRun(row);
  }

  /** Newest first; only one manifest's runs when `manifestPath` is given. */
  listRuns(filter: { manifestPath?: string } = {}): RunRecord[] {
    const rows =
      filter.manifestPath === undefined
        ? this.#selectRuns.all()
        : this.#selectRunsOfManifest.all(filter.manifestPath);
    return rows.map(toRun);
  }

  /** Runs that a `run` of the same manifest would resume: every state but `finished`, newest first. */
  unfinishedRuns(): RunRecord[] {
    return this.#selectUnfinishedRuns.all().map(toRun);
  }

  /**
   * Binds a run to the API it is resumed against: one from before runs were bound, or with `force` one
   * that never spent anything where it was bound (its key was refused, its URL was wrong).
   */
  bindRunToApi(
    id: string,
    api: { baseUrl: string; keyFingerprint: string },
    opts: { force?: boolean } = {},
  ): void {
    this.#bindApi.run({ id, ...api, force: opts.force ? 1 : 0 });
  }

  /** The newest run of this manifest (same file, same name) that did not finish, if any. */
  unfinishedRunOf(manifestPath: string, manifestName: string): RunRecord | undefined {
    const row = this.#selectUnfinishedRunOf.get(manifestPath, manifestName);
    return row === undefined ? undefined : toRun(row);
  }

  /**
   * `running` (re)starts the run: stamps started_at and clears the previous ending. Any other state
   * ends it: stamps finished_at and keeps the exit code the CLI chose.
   */
  markRunState(id: string, state: RunState, exitCode?: number): RunRecord {
    const now = toIso(this.#now());
    const changes =
      state === 'running'
        ? this.#markRunStarted.run({ id, now }).changes
        : this.#markRunEnded.run({
            id,
            state,
            finished: state === 'finished' ? 1 : 0,
            exitCode: exitCode ?? null,
            now,
          }).changes;
    if (changes === 0) throw unknownRun(id);
    return this.#mustGet(id);
  }

  /**
   * Adds the time of a session that died without ending (its process killed, every worker lost) up to
   * `until`, its last sign of work, before another session starts the run again.
   */
  closeLostSession(id: string, until: Date): void {
    this.#closeLostSession.run({ id, until: toIso(until) });
  }

  /**
   * Records why the run stopped, unless a reason is recorded already (the first wins); cleared when the
   * run starts again or finishes. True when this reason is the one kept.
   */
  recordStop(id: string, stop: Omit<RunStop, 'at'>): boolean {
    if (this.#selectRun.get(id) === undefined) throw unknownRun(id);
    const now = toIso(this.#now());
    return this.#recordStop.run({ id, reason: stop.reason, message: stop.message, now }).changes > 0;
  }

  setRunBalance(id: string, balance: { before?: number; after?: number }): void {
    if (this.#selectRun.get(id) === undefined) throw unknownRun(id);
    if (balance.before !== undefined) this.#updateBalanceBefore.run(balance.before, id);
    if (balance.after !== undefined) this.#updateBalanceAfter.run(balance.after, id);
  }

  /** A resumed run may run with changed settings (concurrency, budget). */
  updateRunSettings(id: string, settings: unknown): void {
    if (this.#updateSettings.run(JSON.stringify(settings ?? null), id).changes === 0) throw unknownRun(id);
  }

  setCallbackToken(id: string, token: string): void {
    if (this.#updateCallbackToken.run(token, id).changes === 0) throw unknownRun(id);
  }

  /**
   * The plan the run's tasks are stored from: its task count and its digest (src/store/plan-digest.ts), the
   * digest null while a plan whose digest comes with its last task is stored. `storing`: the digest is the
   * whole plan's, and some of its tasks are still to be stored (by whoever holds the run's storing lease).
   */
  setPlan(id: string, plan: { tasks: number; digest: string | null; storing?: boolean }): void {
    const storing = plan.storing === undefined ? null : plan.storing ? 1 : 0;
    if (this.#updatePlanDigest.run(plan.digest, plan.tasks, storing, id).changes === 0) throw unknownRun(id);
  }

  /** Every task of a plan stored in the background is stored now: the run's plan is whole. */
  planStored(id: string): void {
    this.#planStored.run(id);
  }

  #mustGet(id: string): RunRecord {
    const run = this.getRun(id);
    if (run === undefined) throw unknownRun(id);
    return run;
  }
}

export function unknownRun(id: string): StoreError {
  return new StoreError(
    `run ${id}: not found in the state database: the runs it holds are listed by \`status\` on the same state`,
  );
}
