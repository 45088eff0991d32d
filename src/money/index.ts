// The one owner of a run's money in the code. The store is the authority (src/store/reservations.ts):
// every spend reserves its worst case in the transaction of its intent, checked against the budget there,
// whoever asks (the runner, `review`, the view, a second process). This module is what every spender
// calls: the runner's view of the money (figures read back from the store, never summed on its own), its
// concurrency slots, the reservation of a run's re-rolls, and the figures the preflights and prices read.
// No other file writes a money figure (test/code/money-owner.test.ts).

import type { DecideOutcome, DecideRequest, MoneyFigures, PeriodMoney, Store } from '../store/index.js';
import { OverBudgetError } from '../store/index.js';
import { fromMicro, tokensOf, toMicro } from '../util/money.js';

export { OverBudgetError };

/** What a run's budget holds now, in micro-tokens (the store's figures, summed one way for everyone). */
export interface RunMoneyFigures extends MoneyFigures {
  /** charged − refunded + held + doubt: what the budget already holds. */
  committed: number;
  /** What the budget leaves (undefined without a budget), never below zero. */
  left: number | undefined;
}

/** The store's money of one run, as every spender reads it. */
export function runMoney(store: Store, runId: string): RunMoneyFigures {
  return withCommitted(store.reservations.figures(runId));
}

function withCommitted(f: MoneyFigures): RunMoneyFigures {
  const committed = f.charged - f.refunded + f.held + f.doubt;
  return { ...f, committed, left: f.budget === undefined ? undefined : Math.max(0, f.budget - committed) };
}

/**
 * What a run already owes, in micro-tokens, for a preflight to add to what it is about to send: charged −
 * refunded, and the worst cases the run holds that the tasks to send do not count again (in doubt, in
 * flight, or a re-roll asked for whose task is no longer pending).
 */
export function owedSoFar(store: Store, runId: string): { spent: number; reserved: number } {
  const f = store.reservations.figures(runId);
  return {
    spent: f.charged - f.refunded,
    reserved: f.held + f.doubt - store.reservations.heldForPending(runId),
  };
}

/** What every run of a manifest took of one period (micro-tokens): for the scheduler's check before a firing. */
export function periodMoney(store: Store, manifestPath: string, period: string): PeriodMoney {
  return store.reservations.periodFigures(manifestPath, period);
}

/**
 * A fired run spends from its manifest's `budget_per_period` (tokens) of `period`: every spend of the run,
 * whoever asks for it, is then checked against that cap too, in the store. Nothing for a run not fired.
 */
export function spendFromPeriod(
  store: Store,
  runId: string,
  periodBudget: { period: string; budget: number } | undefined,
): void {
  if (periodBudget === undefined) return;
  store.reservations.setPeriodBudget(runId, periodBudget.period, toMicro(periodBudget.budget));
}

/**
 * Re-rolls (and other decisions) of one ask, recorded together: the re-rolls' worst cases are reserved in
 * the same transaction, all or none; refused tasks say why.
 */
export function decideReserving(
  store: Store,
  runId: string,
  asks: ReadonlyArray<{ taskId: string; req: DecideRequest }>,
): DecideOutcome[] {
  return store.reviews.decideMany(runId, asks);
}

/**
 * The runner's money: its slots, the worst cases it has in flight, and the store's figures read back when
 * something changed. It never decides alone: a submission's intent reserves in the store, which may
 * refuse it (OverBudgetError) because another process took the room first.
 *
 * The runner's own money-moving writes (intents, answers, job news, adoptions) all go through its group
 * commit (src/run/writes.ts), and each batch reads the figures again in its own transaction
 * (readWithBatch): they come back with the commit, before the batch's callers resume, so a spend or an
 * answer of this process needs no read of its own. `changed()` is for what others did meanwhile.
 */
export class RunMoney {
  readonly #store: Store;
  readonly #runId: string;
  readonly budgetMicro: number | undefined;
  #figures: RunMoneyFigures | undefined;
  /** Worst cases of this process's submissions waiting for their answer (also held in the store). */
  #ownHeld = 0;
  /** Worst cases of this process's submissions whose intent is not committed yet (not in the store). */
  #pending = 0;
  #slots = 0;
  #estimateChange = 0;

  constructor(store: Store, runId: string, budgetMicro: number | undefined) {
    this.#store = store;
    this.#runId = runId;
    this.budgetMicro = budgetMicro;
  }

  /** The budget this run works under becomes the one every spender of the run checks. */
  start(): void {
    this.#store.reservations.setBudget(this.#runId, this.budgetMicro);
    this.changed();
  }

  /** Something else moved money in the store (another worker, a review): read it again when asked. */
  changed(): void {
    this.#figures = undefined;
  }

  /**
   * For the group commit: a read of the figures made in a batch's transaction, after its writes; the
   * returned function, called once the batch committed, makes them this runner's figures.
   */
  readWithBatch(): () => void {
    let soon: () => MoneyFigures;
    try {
      soon = this.#store.reservations.figuresSoon(this.#runId);
    } catch (error) {
      this.#figures = undefined;
      throw error;
    }
    return () => {
      try {
        this.#figures = withCommitted(soon());
      } catch {
        // Read again when next asked, where a failure is the caller's to meet.
        this.#figures = undefined;
      }
    };
  }

  get figures(): RunMoneyFigures {
    this.#figures ??= runMoney(this.#store, this.#runId);
    return this.#figures;
  }

  /** What the budget holds besides this process's own submissions in flight. */
  committedMicro(): number {
    return this.figures.committed - this.#ownHeld;
  }

  /**
   * Worst cases other processes hold for submissions in flight (another worker of a fleet): their answers
   * may give room back. Re-rolls reserved for tasks still pending are not in flight.
   */
  othersInFlightMicro(): number {
    const held = this.figures.held - this.#ownHeld - this.#store.reservations.heldForPending(this.#runId);
    return Math.max(0, held);
  }

  /** Worst cases of this process's submissions in flight. */
  get inFlightMaxMicro(): number {
    return this.#ownHeld + this.#pending;
  }

  /**
   * Whether a spend of `priceMicro` fits: beside what is in flight, or (alone) once it has been answered;
   * under the run's budget and, for a fired run, under the period's.
   */
  fits(priceMicro: number, alone = false): boolean {
    const inFlight = alone ? 0 : this.inFlightMaxMicro;
    const p = this.figures.period;
    if (p !== undefined && p.spent + p.reserved - this.#ownHeld + inFlight + priceMicro > p.budget)
      return false;
    const budget = this.#runBudget();
    return budget === undefined || this.committedMicro() + inFlight + priceMicro <= budget;
  }

  /** The run's budget as the store keeps it (another process may have changed it since), which refuses beyond it. */
  #runBudget(): number | undefined {
    return this.figures.budget ?? this.budgetMicro;
  }

  /**
   * The limit that leaves the least (micro-tokens), named as a stop line says it: the run's budget, or the
   * period budget of a fired run when that one is tighter, with what it leaves (`0.1 tokens left`) or, spent
   * past it (lowered, or charged beyond the worst cases held), by how much (`already 0.3 tokens over`).
   * Undefined when the run has neither.
   */
  tightest():
    | { name: string; setting: 'budget' | 'budget_per_period'; leftMicro: number; room: string }
    | undefined {
    const p = this.figures.period;
    const budget = this.#runBudget();
    const run =
      budget === undefined
        ? undefined
        : {
            name: `the budget of ${tokensOf(fromMicro(budget))}`,
            setting: 'budget' as const,
            left: budget - this.committedMicro(),
          };
    // As fits() alone: this process's own submissions in flight are about to be answered.
    const period =
      p === undefined
        ? undefined
        : {
            name: `budget_per_period of ${tokensOf(fromMicro(p.budget))} in ${p.period}`,
            setting: 'budget_per_period' as const,
            left: p.budget - p.spent - p.reserved + this.#ownHeld,
          };
    // A tie names the period: a fired run's budget is often what the period leaves, which is the reason.
    const tighter = period !== undefined && (run === undefined || period.left <= run.left) ? period : run;
    if (tighter === undefined) return undefined;
    const room =
      tighter.left >= 0
        ? `${tokensOf(fromMicro(tighter.left))} left`
        : `already ${tokensOf(fromMicro(-tighter.left))} over`;
    return { name: tighter.name, setting: tighter.setting, leftMicro: Math.max(0, tighter.left), room };
  }

  /** What the task holds already in the store (a re-roll reserved when it was asked for). */
  heldFor(taskId: string): number {
    return this.#store.reservations.heldFor(this.#runId, taskId);
  }

  /** A submission is on its way to its intent: counted at once, before the store has it. */
  reserving(priceMicro: number): void {
    this.#pending += priceMicro;
  }

  /** Its intent was committed with its reservation. */
  reserved(priceMicro: number): void {
    this.#pending -= priceMicro;
    this.#ownHeld += priceMicro;
  }

  /** Its intent was refused (the budget is spoken for) or failed: nothing was recorded. */
  refused(priceMicro: number): void {
    this.#pending -= priceMicro;
  }

  /** Its answer was committed: the store settled, released or kept the reservation as doubt. */
  answered(priceMicro: number): void {
    this.#ownHeld -= priceMicro;
  }

  /** A chained task priced exactly moved the plan's estimate (exact − planned). */
  estimateMoved(deltaMicro: number): void {
    this.#estimateChange += deltaMicro;
  }

  get estimateChange(): number {
    return fromMicro(this.#estimateChange);
  }

  get charged(): number {
    return fromMicro(this.figures.charged);
  }

  get refunded(): number {
    return fromMicro(this.figures.refunded);
  }

  // ---- slots: tasks holding a concurrency slot (submitting, or a job the service is producing) ----

  get slots(): number {
    return this.#slots;
  }

  takeSlot(): void {
    this.#slots++;
  }

  freeSlot(): void {
    this.#slots--;
  }
}
