// What the parts of `mediabatch run` share: its flags, its context, and the run being driven.

import type { ApiClient } from '../../api/client.js';
import type { Config } from '../../config.js';
import type { TaskOrder } from '../../manifest/types.js';
import type { RunPlan } from '../../plan/build.js';
import type { BucketOutput } from '../../results/bucket.js';
import type { ReceiverAddress } from '../../run/receiver.js';
import type { RunSession } from '../../run/session.js';
import type { Logger } from '../../util/log.js';
import type { CliIO } from '../io.js';
import type { ShardFlags } from '../shard.js';

export interface RunFlags extends ShardFlags {
  /** A budget in tokens for this run (a shard's instead of its share of the manifest's). */
  budget?: number;
  yes?: boolean;
  allowPartial?: boolean;
  /** Keep going until every reviewed result is decided. */
  waitForReview?: boolean;
  retryInDoubt?: boolean;
  acceptChanges?: boolean;
  concurrency?: number;
  /** Replaces every task's `retries` for this run. */
  retries?: number;
  /** Task ids or globs, comma-separated: only these are submitted. */
  only?: string;
  /** Submit at most this many pending tasks. */
  limit?: number;
  /** Which pending task goes next; the manifest's `order` when absent. */
  order?: TaskOrder;
  /** Send failed (refunded) and rejected tasks back to pending first. */
  retryFailed?: boolean;
  /** NDJSON events on stdout (./../../run/events.ts); the human display goes to stderr. */
  json?: boolean;
  sandbox?: boolean;
  /** The embedded sandbox's account starts afresh (its balance is kept across sandbox runs otherwise). */
  sandboxReset?: boolean;
  /** Job timing of the embedded sandbox (and our polling, scaled alike). */
  sandboxSpeed?: number;
  probe?: boolean;
  /** Start the template's run even when an older run of the manifest is unfinished. */
  newRun?: boolean;
  /** Drive this run id instead of the one the manifest's `run` template gives now (resume an older run). */
  runId?: string;
  /**
   * An extra cap in tokens for this run, on top of the manifest's `budget` (the scheduler passes what is
   * left of `budget_per_period`).
   */
  budgetCap?: number;
  /** `host:port` for a callback receiver during the run. */
  listen?: string;
  /** The public URL that reaches the receiver (the service must be able to POST to it). */
  callbackUrl?: string;
  /** `foreach` may read data files outside the manifest's folder. */
  allowOutsideData?: boolean;
  /** A PostgreSQL state may write results to a local folder: its workers share that disk. */
  allowLocalOutput?: boolean;
  /** Serve `mediabatch view` of this run while it goes (src/cli/view.ts). */
  view?: boolean;
}

export interface RunContext {
  io: CliIO;
  config: Config;
  statePath: string;
  /** `--config` as the person gave it, kept with the run for the commands printed about it. */
  configFile?: string;
  /** `--base-url` as the person gave it (not from the environment or the config file). */
  baseUrlFlag?: string;
  logger: Logger;
  /** Tests shorten polling; the default is the real schedule (scaled with --sandbox). */
  pollScale?: number;
}

export interface DriveArgs {
  file: string;
  flags: RunFlags;
  ctx: RunContext;
  client: ApiClient;
  fingerprint: string;
  session: RunSession;
  plan: RunPlan;
  onSandbox: boolean;
  /** `--only`, resolved to task ids. */
  only: string[] | undefined;
  callbacks: ReceiverAddress | undefined;
  /** Results go to this bucket (`output: s3://…` or `storage`). */
  bucket: BucketOutput | undefined;
  /** A shard's line for the preflight: its tasks, its budget, the shared balance. */
  shardLine?: string;
}

/** Where the lines for people go: stdout, or stderr when stdout carries --json events. */
export function humanOut(io: CliIO, flags: RunFlags): CliIO['stdout'] {
  return flags.json ? io.stderr : io.stdout;
}
