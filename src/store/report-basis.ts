// What a run's report was written from: the tasks per state, the newest ledger and file rows. When none
// of that moved since, the report on disk is current, and a `run` that finds the run complete leaves it
// as it is instead of writing every task again (a minute at a million tasks).
import type { Db } from './db.js';

export class ReportBasisStore {
  readonly #counts;
  readonly #ledgerMax;
  readonly #filesMax;
  readonly #select;
  readonly #update;

  constructor(db: Db) {
    this.#counts = db.prepare<[string], { state: string; n: number }>(
      'SELECT state, n FROM task_counts WHERE run_id = ? ORDER BY state',
    );
    this.#ledgerMax = db.prepare<[], number | null>('SELECT max(id) FROM ledger').pluck();
    this.#filesMax = db.prepare<[], number | null>('SELECT max(rowid) FROM files').pluck();
    this.#select = db.prepare<[string], string | null>('SELECT report_basis FROM runs WHERE id = ?').pluck();
    this.#update = db.prepare<[string | null, string]>('UPDATE runs SET report_basis = ? WHERE id = ?');
  }

  /** The basis as of now: a few index look-ups, whatever the size of the run. */
  currentReportBasis(runId: string, extra: unknown): string {
    const counts = this.#counts.all(runId).filter((r) => r.n > 0);
    return JSON.stringify([counts, this.#ledgerMax.get() ?? 0, this.#filesMax.get() ?? 0, extra]);
  }

  storedReportBasis(runId: string): string | null {
    return this.#select.get(runId) ?? null;
  }

  /** Kept after the report is written from a basis read before writing it; null forgets it. */
  rememberReportBasis(runId: string, basis: string | null): void {
    this.#update.run(basis, runId);
  }
}
