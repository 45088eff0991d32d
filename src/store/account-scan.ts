// The account's sums computed the slow way, by reading every task, ledger row and attempt of the run:
// what the triggers of migration 15 keep in task_counts and account_money must equal this after any
// sequence of the store's operations (test/account/sums.test.ts holds them to it on SQLite and
// PostgreSQL). Each charge's kind is decided from its task's attempts as they stand now: a re-roll
// when the ledger says so; else the last answer before the attempt that carries its job: in doubt
// makes a retry of doubt, a refunded (failed) job an automatic retry, a job kept a sending again, none
// the first job. A refund is of its charge's kind.

import { toMicro } from '../util/money.js';
import type { AccountSums, KindSums, StateEstimate } from './account-reads.js';
import { emptyAccountSums, estimatesOf } from './account-reads.js';
import type { Db } from './db.js';
import type { MoneyKind, TaskState } from './types.js';

interface LedgerRow {
  task_id: string;
  img_uuid: string;
  kind: 'charge' | 'refund';
  tokens: number;
  reroll: number;
}

interface AttemptRow {
  task_id: string;
  attempt_no: number;
  outcome: 'submitted' | 'rejected' | 'not_charged' | 'in_doubt' | null;
  img_uuid: string | null;
}

export class AccountScanStore {
  readonly #read: (runId: string) => AccountSums;

  constructor(db: Db) {
    const tasks = db.prepare<
      [string],
      { state: TaskState; est_tokens: number; est_min: number; est_max: number }
    >('SELECT state, est_tokens, est_min, est_max FROM tasks WHERE run_id = ?');
    const ledger = db.prepare<[string], LedgerRow>(
      'SELECT task_id, img_uuid, kind, tokens, reroll FROM ledger WHERE run_id = ? ORDER BY id',
    );
    const attempts = db.prepare<[string], AttemptRow>(
      'SELECT task_id, attempt_no, outcome, img_uuid FROM attempts WHERE run_id = ? ORDER BY task_id, attempt_no',
    );
    this.#read = db.transaction((runId: string): AccountSums => {
      const byState = new Map<TaskState, StateEstimate>();
      for (const t of tasks.iterate(runId)) {
        const s = byState.get(t.state) ?? { state: t.state, tokens: 0, min: 0, max: 0 };
        s.tokens += toMicro(t.est_tokens);
        s.min += toMicro(t.est_min);
        s.max += toMicro(t.est_max);
        byState.set(t.state, s);
      }
      return {
        estimates: estimatesOf(byState.values()),
        money: moneyByKind(ledger.all(runId), attempts.all(runId)),
      };
    });
  }

  /** The account's sums of the run, each row read. */
  accountSumsByScan(runId: string): AccountSums {
    return this.#read(runId);
  }
}

function moneyByKind(ledger: readonly LedgerRow[], attempts: readonly AttemptRow[]): AccountSums['money'] {
  const attemptsOf = new Map<string, AttemptRow[]>();
  for (const a of attempts) {
    const of = attemptsOf.get(a.task_id) ?? [];
    of.push(a);
    attemptsOf.set(a.task_id, of);
  }
  const refunded = new Set(ledger.filter((r) => r.kind === 'refund').map((r) => r.img_uuid));
  const kindOfJob = new Map<string, MoneyKind>();
  for (const row of ledger) {
    if (row.kind !== 'charge') continue;
    const kind = row.reroll === 1 ? 'reroll' : kindOfCharge(row, attemptsOf.get(row.task_id) ?? [], refunded);
    kindOfJob.set(row.img_uuid, kind);
  }
  const { money } = emptyAccountSums();
  const tasksOf = new Map<MoneyKind, Set<string>>();
  for (const row of ledger) {
    const kind = kindOfJob.get(row.img_uuid) ?? 'first';
    const sums: KindSums = money[kind];
    if (row.kind === 'charge') {
      sums.jobs++;
      sums.charged += toMicro(row.tokens);
      const tasks = tasksOf.get(kind) ?? new Set<string>();
      tasks.add(row.task_id);
      tasksOf.set(kind, tasks);
      sums.tasks = tasks.size;
    } else {
      sums.refunded += toMicro(row.tokens);
    }
  }
  return money;
}

function kindOfCharge(
  charge: LedgerRow,
  attempts: readonly AttemptRow[],
  refunded: ReadonlySet<string>,
): MoneyKind {
  // Each answer recorded, a job's own attempt carries it; the latest when none does.
  const own = attempts.find((a) => a.img_uuid === charge.img_uuid) ?? attempts.at(-1);
  const before = attempts.filter(
    (a) =>
      (own === undefined || a.attempt_no < own.attempt_no) &&
      (a.outcome === 'in_doubt' || a.outcome === 'submitted'),
  );
  const last = before.at(-1);
  if (last === undefined) return 'first';
  if (last.outcome === 'in_doubt') return 'doubt_retry';
  return last.img_uuid !== null && refunded.has(last.img_uuid) ? 'retry' : 'sent_again';
}
