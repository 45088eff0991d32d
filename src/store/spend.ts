// What the ledger says each task of a run cost, for the cost report. Read only: charges and refunds are
// written by the submission and job modules. A task sent more than once (`--retry-in-doubt`,
// `--accept-changes`, automatic retries) has one charge per job, so the task's own `cost` column is not
// enough.

import { fromMicro, toMicro } from '../util/money.js';
import type { Db } from './db.js';
import { tokensTotal } from './micro.js';
import type { TaskSpend } from './types.js';

interface TaskSpendRow {
  task_id: string;
  charged: number;
  refunded: number;
  jobs: number;
  assumed_jobs: number;
}

/** A task's spend, with how many of its charges were booked at list price (the API did not state them). */
export interface ReportTaskSpend extends TaskSpend {
  assumedJobs: number;
}

export class SpendStore {
  readonly #selectTaskSpend;
  readonly #selectRunKeys;

  constructor(db: Db) {
    this.#selectTaskSpend = db.prepare<[string], TaskSpendRow>(
      `SELECT task_id,
         ${tokensTotal('tokens', "kind = 'charge'")} AS charged,
         ${tokensTotal('tokens', "kind = 'refund'")} AS refunded,
         count(CASE WHEN kind = 'charge' THEN 1 END) AS jobs,
         count(CASE WHEN kind = 'charge' AND assumed = 1 THEN 1 END) AS assumed_jobs
       FROM ledger WHERE run_id = ? GROUP BY task_id ORDER BY task_id`,
    );
    this.#selectRunKeys = db
      .prepare<[string], string>(
        'SELECT DISTINCT key_fingerprint FROM ledger WHERE run_id = ? ORDER BY key_fingerprint',
      )
      .pluck();
  }

  /** Per task of the run that the ledger knows: every charge and refund, and how many jobs were charged. */
  taskSpend(runId: string): ReportTaskSpend[] {
    return this.#selectTaskSpend.all(runId).map((row) => ({
      taskId: row.task_id,
      charged: row.charged,
      refunded: row.refunded,
      net: fromMicro(toMicro(row.charged) - toMicro(row.refunded)),
      jobs: row.jobs,
      assumedJobs: row.assumed_jobs,
    }));
  }

  /** The API-key fingerprints the run was charged under (usually one). */
  runKeys(runId: string): string[] {
    return this.#selectRunKeys.all(runId);
  }
}
