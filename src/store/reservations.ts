// Money the store arbitrates (table `reservations`, `run_money` of migration 13). Every spend of a run —
// a first submission, an automatic retry, a re-roll, a retry of doubt, a downstream an approval let go —
// reserves its worst case inside the transaction that records its intent, and only if the run's budget
// still holds it: reserved + charged − refunded + price ≤ budget. The check and the row it allows are one
// step for every process on the state: on SQLite the transaction took the file's one write lock first
// (BEGIN IMMEDIATE); on PostgreSQL the check first takes the run's money lock (and a fired run's period
// lock, after it), so two workers' checks of one budget take turns, whatever else runs.
// An answer settles the reservation (the ledger has the charge), a refusal or a not-charged answer
// releases it, an answer lost keeps it as doubt until the task is resolved. Amounts are micro-tokens.
//
// A run the scheduler fired also spends from its manifest's `budget_per_period` (run_money.period and
// period_budget, migration 16): the same reservation checks, in the same transaction, that every run of
// the manifest together stays under it — charged − refunded in the period (period_money, kept by a
// trigger) plus the worst cases they hold open — so whichever of the two budgets is tighter refuses.
//
// These methods run inside the callers' transactions (submissions, reviews, tasks); only `figures`,
// `periodFigures`, `setBudget` and `setPeriodBudget` stand alone.

import { MediabatchError } from '../errors.js';
import { fromMicro, roomText, tokensOf } from '../util/money.js';
import { changesRow, type Db, inPipeline, readSoon } from './db.js';

export type ReservationKind = 'first' | 'retry' | 'reroll' | 'doubt';
export type ReservationState = 'held' | 'doubt' | 'settled' | 'released';

/** A run's money as the store knows it, in micro-tokens. */
export interface MoneyFigures {
  /** The budget spenders check against; undefined when the run has none. */
  budget: number | undefined;
  charged: number;
  refunded: number;
  /** Worst cases of spends asked for or sent and not answered yet. */
  held: number;
  /** Worst cases of spends whose answer was lost: they may have been charged. */
  doubt: number;
  /** The period budget a fired run also spends from (undefined when the scheduler did not fire it). */
  period: PeriodFigures | undefined;
}

/** What every run of a manifest took of one period, in micro-tokens. */
export interface PeriodMoney {
  /** charged − refunded in the period by the manifest's runs. */
  spent: number;
  /** Worst cases the manifest's runs hold open (asked for, in flight or in doubt): they may still charge. */
  reserved: number;
}

/** A period budget (`budget_per_period`) and what the manifest's runs took of it, in micro-tokens. */
export interface PeriodFigures extends PeriodMoney {
  /** `YYYY-MM` (UTC), the period the run was fired in. */
  period: string;
  budget: number;
}

/**
 * A spend the budget cannot hold: nothing was recorded. The runner and review turn it into an outcome
 * (the task left pending, the re-roll refused with the reason), so it keeps EXIT.internal.
 */
export class OverBudgetError extends MediabatchError {
  override name = 'OverBudgetError';
  /** What the budget leaves, and what the spend needs, in micro-tokens. */
  readonly leftMicro: number;
  readonly needMicro: number;

  constructor(message: string, leftMicro: number, needMicro: number) {
    super(message);
    this.leftMicro = leftMicro;
    this.needMicro = needMicro;
  }
}

interface FiguresRow {
  budget: number | null;
  manifest_path: string;
  period: string | null;
  period_budget: number | null;
  charged: number;
  refunded: number;
  held: number;
  doubt: number;
}

type Key = { runId: string; taskId: string };

interface IntentBasisRow {
  price: number | null;
  open_id: number | null;
  open_amount: number | null;
  open_state: ReservationState | null;
  doubt: number;
  charged: number;
}

export class ReservationStore {
  readonly #figures;
  readonly #open;
  readonly #insert;
  readonly #grow;
  readonly #close;
  readonly #toDoubt;
  readonly #setBudget;
  readonly #setPeriodBudget;
  readonly #periodSpend;
  readonly #heldForPending;
  readonly #priceOf;
  readonly #intentBasis;
  readonly #lockRunMoney;
  readonly #lockPeriodMoney;
  readonly #reserveFresh;
  readonly #db: Db;
  /** Runs seen with a period budget: their intents take the path that locks the period (#reserveChecked). */
  readonly #periodRuns = new Set<string>();

  // Long on purpose: every statement is prepared once, here, and named for what it does.
  constructor(db: Db) {
    this.#db = db;
    // Plain reads on SQLite, whose transaction holds the file's one write lock already; on PostgreSQL
    // (overrides.ts) they take the run's money lock, and the period's, until the transaction ends.
    this.#lockRunMoney = db.prepare<[string]>('SELECT run_id FROM run_money WHERE run_id = ?');
    this.#lockPeriodMoney = db.prepare<[string, string]>(
      'SELECT manifest_path FROM period_money WHERE manifest_path = ? AND period = ?',
    );
    this.#figures = db.prepare<{ runId: string }, FiguresRow>(
      `SELECT m.budget AS budget, r.manifest_path AS manifest_path, m.period AS period,
         m.period_budget AS period_budget, coalesce(m.charged, 0) AS charged, coalesce(m.refunded, 0) AS refunded,
         coalesce(o.held, 0) AS held, coalesce(o.doubt, 0) AS doubt
       FROM runs r LEFT JOIN run_money m ON m.run_id = r.id
       LEFT JOIN (SELECT run_id, sum(CASE WHEN state = 'held' THEN amount END) AS held,
           sum(CASE WHEN state = 'doubt' THEN amount END) AS doubt
         FROM reservations INDEXED BY reservations_open
         WHERE run_id = :runId AND state IN ('held', 'doubt') GROUP BY run_id) o ON o.run_id = r.id
       WHERE r.id = :runId`,
    );
    this.#open = db.prepare<[string, string], { id: number; amount: number; state: ReservationState }>(
      `SELECT id, amount, state FROM reservations
       WHERE run_id = ? AND task_id = ? AND state IN ('held', 'doubt')`,
    );
    this.#insert = db.prepare<Key & { kind: ReservationKind; amount: number; now: string }>(
      `INSERT INTO reservations (run_id, task_id, kind, amount, state, reserved_at)
       VALUES (:runId, :taskId, :kind, :amount, 'held', :now)`,
    );
    this.#grow = db.prepare<{ id: number; amount: number }>(
      'UPDATE reservations SET amount = :amount WHERE id = :id',
    );
    // `state IN ('held', 'doubt')` written out, so the partial index of open reservations finds the row
    // (with the states as a parameter, each answer scanned every reservation of the state file).
    this.#close = db.prepare<
      Key & {
        state: 'settled' | 'released';
        charged: number | null;
        now: string;
        held: number;
        doubt: number;
      }
    >(
      `UPDATE reservations SET state = :state, charged = :charged, closed_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state IN ('held', 'doubt')
         AND ((state = 'held' AND :held = 1) OR (state = 'doubt' AND :doubt = 1))`,
    );
    this.#toDoubt = db.prepare<Key>(
      `UPDATE reservations SET state = 'doubt'
       WHERE run_id = :runId AND task_id = :taskId AND state IN ('held', 'doubt') AND state = 'held'`,
    );
    this.#setBudget = db.prepare<{ runId: string; budget: number | null }>(
      `INSERT INTO run_money (run_id, budget) VALUES (:runId, :budget)
       ON CONFLICT (run_id) DO UPDATE SET budget = excluded.budget`,
    );
    this.#setPeriodBudget = db.prepare<{ runId: string; period: string; budget: number }>(
      'UPDATE run_money SET period = :period, period_budget = :budget WHERE run_id = :runId',
    );
    // The open reservations of every run of the manifest count, whenever they were made: any of them may
    // still be charged, and would be charged now.
    this.#periodSpend = db.prepare<{ manifestPath: string; period: string }, PeriodMoney>(
      `SELECT coalesce((SELECT charged - refunded FROM period_money
           WHERE manifest_path = :manifestPath AND period = :period), 0) AS spent,
         coalesce((SELECT sum(amount) FROM reservations INDEXED BY reservations_open
           WHERE state IN ('held', 'doubt')
             AND run_id IN (SELECT id FROM runs WHERE manifest_path = :manifestPath)), 0) AS reserved`,
    );
    this.#heldForPending = db
      .prepare<[string], number>(
        `SELECT coalesce(sum(r.amount), 0) FROM reservations AS r INDEXED BY reservations_open
         JOIN tasks AS t ON t.run_id = r.run_id AND t.task_id = r.task_id
         WHERE r.run_id = ? AND r.state IN ('held', 'doubt') AND r.state = 'held' AND t.state = 'pending'`,
      )
      .pluck();
    this.#priceOf = db
      .prepare<[string, string], number>(
        'SELECT CAST(round(est_max * 1000000) AS INTEGER) FROM tasks WHERE run_id = ? AND task_id = ?',
      )
      .pluck();
    // What an intent needs before its check, in one read: the task's worst case, its open reservation
    // (a re-roll's), and whether an earlier attempt of it was lost or charged (the kind of the spend).
    this.#intentBasis = db.prepare<[string, string], IntentBasisRow>(
      `SELECT CAST(round(t.est_max * 1000000) AS INTEGER) AS price,
         r.id AS open_id, r.amount AS open_amount, r.state AS open_state,
         EXISTS (SELECT 1 FROM attempts AS a WHERE a.run_id = t.run_id AND a.task_id = t.task_id
           AND a.outcome = 'in_doubt') AS doubt,
         EXISTS (SELECT 1 FROM attempts AS a WHERE a.run_id = t.run_id AND a.task_id = t.task_id
           AND a.outcome = 'submitted') AS charged
       FROM tasks AS t LEFT JOIN reservations AS r
         ON r.run_id = t.run_id AND r.task_id = t.task_id AND r.state IN ('held', 'doubt')
       WHERE t.run_id = ? AND t.task_id = ?`,
    );
    // The common intent decided by the server, so a PostgreSQL pipeline need not wait for the figures: a
    // task with no open reservation, of a run without a period budget, reserved if the budget holds it.
    // It writes no row otherwise, and the transaction runs again the way that reads (#reserveChecked).
    this.#reserveFresh = db.prepare<Key & { now: string }>(
      `INSERT INTO reservations (run_id, task_id, kind, amount, state, reserved_at)
       SELECT t.run_id, t.task_id,
         CASE WHEN EXISTS (SELECT 1 FROM attempts AS a WHERE a.run_id = t.run_id AND a.task_id = t.task_id
             AND a.outcome = 'in_doubt') THEN 'doubt'
           WHEN EXISTS (SELECT 1 FROM attempts AS a WHERE a.run_id = t.run_id AND a.task_id = t.task_id
             AND a.outcome = 'submitted') THEN 'retry'
           ELSE 'first' END,
         coalesce(CAST(round(t.est_max * 1000000) AS INTEGER), 0), 'held', :now
       FROM tasks AS t LEFT JOIN run_money AS m ON m.run_id = t.run_id
       WHERE t.run_id = :runId AND t.task_id = :taskId
         AND NOT EXISTS (SELECT 1 FROM reservations AS o WHERE o.run_id = t.run_id AND o.task_id = t.task_id
           AND o.state IN ('held', 'doubt'))
         AND (m.period IS NULL OR m.period_budget IS NULL)
         AND (m.budget IS NULL OR coalesce(m.charged, 0) - coalesce(m.refunded, 0)
           + coalesce((SELECT sum(o.amount) FROM reservations AS o INDEXED BY reservations_open
               WHERE o.run_id = :runId AND o.state IN ('held', 'doubt')), 0)
           + coalesce(CAST(round(t.est_max * 1000000) AS INTEGER), 0) <= m.budget)`,
    );
  }

  /**
   * figures(), read with the statements of the open transaction (in a PostgreSQL pipeline, from its
   * commit's round trip) and given when the returned function is called, after the commit.
   */
  figuresSoon(runId: string): () => MoneyFigures {
    const row = readSoon(this.#figures, { runId });
    return () => this.#figuresOf(row());
  }

  /** `beforePeriod`: called before a fired run's period is read (the check locks it there). */
  figures(runId: string, beforePeriod?: (manifestPath: string, period: string) => void): MoneyFigures {
    return this.#figuresOf(this.#figures.get({ runId }), beforePeriod);
  }

  #figuresOf(
    row: FiguresRow | undefined,
    beforePeriod?: (manifestPath: string, period: string) => void,
  ): MoneyFigures {
    let period: PeriodFigures | undefined;
    if (row?.period_budget != null && row.period !== null) {
      beforePeriod?.(row.manifest_path, row.period);
      period = {
        period: row.period,
        budget: row.period_budget,
        ...this.periodFigures(row.manifest_path, row.period),
      };
    }
    return {
      budget: row?.budget ?? undefined,
      charged: row?.charged ?? 0,
      refunded: row?.refunded ?? 0,
      held: row?.held ?? 0,
      doubt: row?.doubt ?? 0,
      period,
    };
  }

  /** What every run of the manifest took of the period: spent, and held open. */
  periodFigures(manifestPath: string, period: string): PeriodMoney {
    const row = this.#periodSpend.get({ manifestPath, period });
    return { spent: row?.spent ?? 0, reserved: row?.reserved ?? 0 };
  }

  /**
   * The run was fired in `period`: from now on each of its spends also needs room under the manifest's
   * `budget_per_period` (micro-tokens), beside every other run of the manifest.
   */
  setPeriodBudget(runId: string, period: string, budgetMicro: number): void {
    this.#setPeriodBudget.run({ runId, period, budget: budgetMicro });
  }

  /** The worst case the task holds, not sent yet or in flight (0 when none). */
  heldFor(runId: string, taskId: string): number {
    const open = this.#open.get(runId, taskId);
    return open?.state === 'held' ? open.amount : 0;
  }

  /** Worst cases held for tasks still pending (re-rolls asked for, not sent yet), in micro-tokens. */
  heldForPending(runId: string): number {
    return this.#heldForPending.get(runId) ?? 0;
  }

  /** The budget the run's spenders check from now on (micro-tokens; undefined: none). */
  setBudget(runId: string, budgetMicro: number | undefined): void {
    this.#setBudget.run({ runId, budget: budgetMicro ?? null });
  }

  /**
   * In the intent's transaction: the task's worst case (its `est_max` now) reserved, or the re-roll's
   * reservation taken over (grown if the price grew). Throws OverBudgetError when the budget cannot hold it.
   */
  reserveForIntent(runId: string, taskId: string, now: string): void {
    if (inPipeline(this.#db) && !this.#periodRuns.has(runId)) {
      this.#lockRunMoney.run(runId);
      if (changesRow(this.#reserveFresh, { runId, taskId, now })) return;
    }
    this.#reserveChecked(runId, taskId, now);
  }

  #reserveChecked(runId: string, taskId: string, now: string): void {
    // The task's basis and the run's money (under its lock) are read in one round trip on PostgreSQL.
    const basisSoon = readSoon(this.#intentBasis, runId, taskId);
    const money = this.#lockedFigures(runId);
    const basis = basisSoon();
    const price = basis?.price ?? 0;
    const open =
      basis?.open_id == null || basis.open_amount === null || basis.open_state === null
        ? undefined
        : { id: basis.open_id, amount: basis.open_amount, state: basis.open_state };
    if (open?.state === 'held') {
      if (price <= open.amount) return;
      this.#check(runId, [taskId], price - open.amount, money);
      this.#grow.run({ id: open.id, amount: price });
      return;
    }
    // A task back in the queue from doubt gives its doubt up when it is sent again (tasks.ts releases it
    // on requeue; this covers a path that did not).
    if (open !== undefined) this.release(runId, taskId, now, ['doubt']);
    // A submission after a lost answer is a retry of doubt; after a charged one, an automatic retry.
    const kind: ReservationKind = basis?.doubt ? 'doubt' : basis?.charged ? 'retry' : 'first';
    // The money read before a release is read again after it.
    this.#check(runId, [taskId], price, open === undefined ? money : undefined);
    this.#insert.run({ runId, taskId, kind, amount: price, now });
  }

  /**
   * In a decision's transaction: every re-roll of one ask reserved at once, or none (OverBudgetError).
   * Tasks that already hold one keep it.
   */
  reserveRerolls(runId: string, taskIds: readonly string[], now: string): void {
    const fresh = taskIds.filter((taskId) => this.#open.get(runId, taskId) === undefined);
    const prices = fresh.map((taskId) => this.#priceOf.get(runId, taskId) ?? 0);
    this.#check(
      runId,
      fresh,
      prices.reduce((n, p) => n + p, 0),
    );
    fresh.forEach((taskId, i) => {
      this.#insert.run({ runId, taskId, kind: 'reroll', amount: prices[i] ?? 0, now });
    });
  }

  /** The answer charged: the ledger has the charge now, the worst case is no longer held. */
  settle(runId: string, taskId: string, chargedMicro: number, now: string): void {
    this.#close.run({ runId, taskId, state: 'settled', charged: chargedMicro, now, held: 1, doubt: 1 });
  }

  /** Known not charged (refused, not sent, a retry of doubt asked for): the worst case is given back. */
  release(
    runId: string,
    taskId: string,
    now: string,
    from: ReadonlyArray<'held' | 'doubt'> = ['held'],
  ): void {
    const held = from.includes('held') ? 1 : 0;
    const doubt = from.includes('doubt') ? 1 : 0;
    this.#close.run({ runId, taskId, state: 'released', charged: null, now, held, doubt });
  }

  /** Sent, answer lost: the worst case stays reserved until the task is resolved. */
  doubt(runId: string, taskId: string): void {
    this.#toDoubt.run({ runId, taskId });
  }

  /** Both budgets hold the spend (the run's, and a fired run's period), or OverBudgetError names the one that does not. */
  /** The run's money lock taken, and its figures read (when the returned function is called). */
  #lockedFigures(runId: string): () => FiguresRow | undefined {
    this.#lockRunMoney.run(runId);
    return readSoon(this.#figures, { runId });
  }

  /**
   * `locked`: the run's figures read under its money lock in this transaction (#lockedFigures), when the
   * caller sent that read early.
   */
  #check(
    runId: string,
    taskIds: readonly string[],
    needMicro: number,
    locked: () => FiguresRow | undefined = this.#lockedFigures(runId),
  ): void {
    const f = this.#figuresOf(locked(), (manifestPath, period) =>
      this.#lockPeriodMoney.run(manifestPath, period),
    );
    // A period budget is never taken off a run: its intents read the figures from now on.
    if (f.period !== undefined) this.#periodRuns.add(runId);
    const what = taskIds.length === 1 ? (taskIds[0] ?? '') : `${taskIds.length} tasks`;
    if (f.budget !== undefined) {
      const committed = f.charged - f.refunded + f.held + f.doubt;
      if (committed + needMicro > f.budget) {
        throw new OverBudgetError(
          `${what} may cost up to ${tokens(needMicro)} and the budget of ${tokens(f.budget)} ${roomText(f.budget - committed)} (${tokens(f.charged - f.refunded)} spent, ${tokens(f.held + f.doubt)} reserved for tasks asked for, in flight or in doubt)`,
          Math.max(0, f.budget - committed),
          needMicro,
        );
      }
    }
    const p = f.period;
    if (p === undefined || p.spent + p.reserved + needMicro <= p.budget) return;
    const left = p.budget - p.spent - p.reserved;
    throw new OverBudgetError(
      `${what} may cost up to ${tokens(needMicro)} and budget_per_period of ${tokens(p.budget)} ${roomText(left)} in ${p.period} (${tokens(p.spent)} spent by the manifest's runs in ${p.period}, ${tokens(p.reserved)} reserved for their tasks asked for, in flight or in doubt)`,
      Math.max(0, left),
      needMicro,
    );
  }
}

/** Micro-tokens as a refusal line says them: `2 tokens`, `6.999999 tokens`. */
function tokens(micro: number): string {
  return tokensOf(fromMicro(micro));
}
