// Opening a run: which run (resume before a new id), its lease, its row bound to one API and key, its
// folder's mark, its tasks from the plan, and what a crash or the user's flags send back to pending.
// Nothing here prints or decides exit codes: problems are RunErrors, facts come back in the session.

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { MediabatchError } from '../errors.js';
import { EXIT, type ExitCode } from '../exit-codes.js';
import type { TaskOrder } from '../manifest/types.js';
import { parseShardRunId, type Shard } from '../plan/shard.js';
import { type RecordedInvocation, recordedInvocation } from '../results/invocation.js';
import { isBucketLocation, runLocation } from '../results/output.js';
import {
  isPostgresUrl,
  keptSettings,
  lastSignOfWork,
  leaseHolder,
  type NewTask,
  PlanDigest,
  planDigestOf,
  type RunRecord,
  type RunState,
  type Store,
  type UpsertResult,
} from '../store/index.js';
import { fmtCount, fmtTokens } from '../util/numbers.js';
import { newCallbackToken } from './callbacks.js';
import { holderIsDead, runLeaseName } from './lease.js';
import { claimRunFolder, RunFolderTakenError } from './marker.js';
import { chooseRun, chooseShardRun, type RunChoice, ShardRunError } from './resume.js';
import { DEFAULT_RUN_POLICY } from './settings.js';
import {
  BackgroundStoring,
  type IncomingTasks,
  SharedStoring,
  STORE_CHUNK,
  storedOf,
  storingLeaseName,
} from './storing.js';

/** What went wrong opening or running, for the caller to word and map (the CLI maps it to an exit code). */
export type RunErrorKind = 'invalid' | 'busy' | 'refused' | 'unauthorized' | 'interrupted';

export class RunError extends MediabatchError {
  override name = 'RunError';
  override readonly exitCode: ExitCode;
  constructor(
    readonly kind: RunErrorKind,
    message: string,
    /** Lines that explain, one per item (e.g. each changed task). */
    override readonly details: readonly string[] = [],
  ) {
    super(message);
    this.exitCode = RUN_ERROR_EXITS[kind];
  }
}

/** A run another process holds is busy now, not wrong: running again later goes on (exit 4). */
const RUN_ERROR_EXITS: Readonly<Record<RunErrorKind, ExitCode>> = {
  invalid: EXIT.invalid,
  busy: EXIT.interrupted,
  refused: EXIT.refused,
  unauthorized: EXIT.unauthorized,
  interrupted: EXIT.interrupted,
};

/** What a run needs from its plan: its tasks as store rows, then nothing but ids and totals. */
export interface PlannedRun {
  settings: {
    name: string;
    runId: string;
    output: string;
    concurrency: number;
    order?: TaskOrder;
    budget?: number | undefined;
  };
  taskIds: readonly string[];
  rows(opts?: { withoutCallback?: boolean }): Iterable<NewTask>;
  release(): void;
  /** With these, a new run of many tasks may start before every task is stored (RunPlan in plan/build.ts). */
  totals?: { byModel: Record<string, { tasks: number; tokens: number; min: number; max: number }> };
  longestFrom?(position: number): number;
  chained?: boolean;
  localInputs?: boolean;
}

export interface OpenRunOptions {
  store: Store;
  plan: PlannedRun;
  /** Absolute path of the manifest: with its name, it identifies the run's manifest. */
  manifestPath: string;
  /** Absolute path of the state file, for the run folder's mark. */
  stateFile: string;
  /** The API and key (fingerprint) this process talks to. */
  api: { baseUrl: string; keyFingerprint: string };
  settingsToKeep: unknown;
  runId?: string;
  newRun?: boolean;
  acceptChanges?: boolean;
  retryFailed?: boolean;
  retryInDoubt?: boolean;
  /** A callback receiver will run: the run needs its (kept) token. */
  wantsCallbackToken?: boolean;
  /** Paths as the user knows them, for messages. */
  shown?: (path: string) => string;
  leaseTtlMs?: number;
  /** This process drives one shard of the run (`<run>.shard-<i>-of-<n>`); the plan holds its tasks only. */
  shard?: Shard;
  /** A worker of a fleet waits this long for another one's opening (its plan and preflight) to end. */
  openingWaitMs?: number;
  /**
   * A new run stores at most this many tasks before it opens; the rest are stored while it runs
   * (default STORE_FIRST). Infinity stores every task first (`--only` and `--limit` need them all).
   */
  storeFirst?: number;
  /**
   * Aborted while the run opens (its plan checked and stored, its preflight): what the opening holds is
   * given back at once, in the abort itself (the opening lease, the storing lease), so that the next worker
   * starts without waiting for them to run out; the opening then ends with a RunError ('interrupted').
   */
  signal?: AbortSignal;
}

/** Tasks a new run stores before it starts; a larger run stores the rest while it runs. */
export const STORE_FIRST = 20_000;

export interface RunSession {
  store: Store;
  runId: string;
  runDir: string;
  /** The run as it was before this session touched it; undefined for a new run. */
  existing: RunRecord | undefined;
  /**
   * A resumed run whose manifest now names another output, where it had written nothing yet: its results go
   * to the new place (`to`, the run's folder or bucket prefix), recorded so every surface names it.
   */
  outputMoved?: { from: string; to: string };
  choice: RunChoice;
  upsert: UpsertResult;
  /** Tasks cut off while being submitted by a process that died: now in doubt. */
  recovered: string[];
  requeued: { failed: string[]; inDoubt: string[] };
  /** Chained tasks blocked by an upstream that no longer blocks them: pending again. */
  unblocked: string[];
  /**
   * The tasks of a large new run still being stored while it runs (by this process, or on PostgreSQL by
   * whichever worker of the run holds its storing lease); undefined when all are stored.
   */
  storing: IncomingTasks | undefined;
  /** What a run still being stored will submit, per model, from its plan (the store has only some rows). */
  plannedPending: PendingModel[] | undefined;
  callbackToken: string | null;
  leaseName: string;
  holder: string;
  /**
   * On a PostgreSQL state the run may have several workers: this process is one (its id is `holder`).
   * `joined`: the run was already being worked on, so this one skipped the plan's upsert and the preflight.
   */
  fleet: { joined: boolean; workers: number; ttlMs: number } | undefined;
  /** A worker of a fleet starts working: its worker row, and the opening lease is given back. */
  startWorking(): void;
  /** Records that a new run never got going (a refusal); an older run is left as it was. */
  refuse(exitCode: number, message?: string): void;
  /** Renews the lease; false when another process took it. */
  renew(): boolean;
  /** How long the lease lives past a renewal (renewed four times in that). */
  leaseTtlMs: number;
  /** Releases the lease. Call it once, whatever happened. */
  close(): void;
}

/** What the pending tasks of one model come to (the preflight's table). */
export interface PendingModel {
  model: string;
  tasks: number;
  tokens: number;
  min: number;
  max: number;
}

export { EMBEDDED_SANDBOX } from '../results/invocation.js';

/**
 * Longer than most on purpose: its steps must happen in this order under one lease (choose, lease, bind,
 * mark, upsert, recover, requeue), and reading them in one place is how that order is checked.
 */
export async function openRunSession(o: OpenRunOptions): Promise<RunSession> {
  const { store, plan } = o;
  const shown = o.shown ?? ((p: string) => p);
  const choice = chooseRunOrShard(store, o);
  const runId = choice.runId;
  const runDir = runLocation(plan.settings.output, runId);
  const ttl = o.leaseTtlMs ?? DEFAULT_RUN_POLICY.leaseTtlMs;
  const holder = leaseHolder(process.pid, hostname(), randomBytes(4).toString('hex'));
  const leaseName = runLeaseName(runId);
  const fleet = isPostgresUrl(store.file);
  // A worker of a fleet compares its plan's digest with the run's, or records it: made before the opening
  // lease, so that workers starting together make their passes side by side, not one after another.
  if (fleet) digestOf(plan);
  const lastSign = await takeRunLease(store, { runId, leaseName, holder, ttl, fleet }, o);
  let storing: IncomingTasks | undefined;
  // Interrupted while opening: given back now, not when the lease runs out (the process may end at once).
  const opening = whileOpening(o.signal, () => {
    storing?.stop();
    store.leases.releaseLease(leaseName, holder);
  });
  try {
    const existing = store.runs.getRun(runId);
    if (fleet && existing && liveWorkers(store, runId) > 0) {
      opening.end();
      return await joinRun(store, { o, runId, runDir, existing, choice, holder, leaseName, ttl });
    }
    if (existing) refuseAnotherBatch(o, runId, existing);
    if (existing?.state === 'running' && lastSign !== undefined) store.runs.closeLostSession(runId, lastSign);
    const refuse = refuser(store, runId, existing);
    bindOrCreate(store, runId, existing, o);
    const outputMoved = existing ? followOutput(store, existing, o, shown) : undefined;
    if (existing) followPartial(store, runId, o.settingsToKeep);
    await claimFolder(runDir, o.stateFile, runId, shown, refuse);
    opening.check(runId);
    const callbackToken = keptCallbackToken(store, runId, existing, o.wantsCallbackToken === true);
    const { upsert, ...planned } = storePlan(store, o, { runId, existing, holder, ttl, fleet });
    storing = planned.storing;
    if (planned.changedRefused) {
      refuse(EXIT.invalid);
      throw changedError(upsert.changed, shown(o.manifestPath));
    }
    const recovered = store.submissions.recoverInterruptedSubmissions(runId);
    const requeued = requeue(store, runId, o);
    // Chained tasks blocked by an upstream that is now requeued (or whose result this run fetches) get
    // their chance again; the runner blocks them anew if the upstream still gives them nothing.
    const unblocked = store.chains.unblockDownstreams(runId);
    return {
      store,
      runId,
      runDir,
      existing,
      outputMoved,
      choice,
      upsert,
      recovered,
      requeued,
      unblocked,
      storing,
      plannedPending: planned.pending ?? (storing ? plannedPending(plan) : undefined),
      callbackToken,
      leaseName,
      holder,
      refuse,
      ...leaseParts(store, { runId, leaseName, holder, ttl, fleet }, opening),
      close: () => {
        opening.end();
        storing?.stop();
        store.leases.releaseLease(leaseName, holder);
        if (fleet) store.claims.leave(runId, holder);
      },
    };
  } catch (error) {
    opening.end();
    storing?.stop();
    store.leases.releaseLease(leaseName, holder);
    // Taken before the first rows went in, which may have failed: nobody stores under it now.
    if (fleet) store.leases.releaseLease(storingLeaseName(runId), holder);
    throw error;
  }
}

/** Records that a new run never got going (a refusal); an older run is left as it was. */
function refuser(store: Store, runId: string, existing: RunRecord | undefined): RunSession['refuse'] {
  return (code, message) => {
    if (existing) return;
    store.runs.markRunState(runId, 'refused', code);
    if (message !== undefined) store.runs.recordStop(runId, { reason: 'refused', message });
  };
}

/**
 * The plan's tasks into the store: all of them (a resumed run: each compared with the one stored), or a new
 * run's first ones and the rest while it runs (`storing`). `changedRefused`: sent tasks whose request changed,
 * without --accept-changes (nothing more is stored then).
 */
function storePlan(
  store: Store,
  o: OpenRunOptions,
  r: { runId: string; existing: RunRecord | undefined; holder: string; ttl: number; fleet: boolean },
): {
  upsert: UpsertResult;
  changedRefused: boolean;
  storing: IncomingTasks | undefined;
  pending?: PendingModel[];
} {
  const { plan } = o;
  const { runId, holder, ttl } = r;
  const resumed = r.fleet && r.existing?.planStoring === true ? resumeStoring(store, o, r) : undefined;
  if (resumed) return resumed;
  const first = r.existing ? Number.POSITIVE_INFINITY : storedFirst(plan, o.storeFirst);
  // A fleet's run stored while it runs: its whole plan's digest first, so that its workers join at once.
  const shared =
    r.fleet && first < plan.taskIds.length ? sharePlan(store, runId, plan, holder, ttl) : undefined;
  // The callback URL is added when sending (see Runner): where answers go is not part of what a task
  // asks for, so changing it (or adding --listen) never makes a sent task look changed.
  const { rows, digest } = shared ? { rows: shared, digest: undefined } : digestedRows(plan);
  const upsert = store.tasks.upsertTasks(
    runId,
    first < plan.taskIds.length ? take(rows, first) : { [Symbol.iterator]: () => rows },
    { acceptChanges: o.acceptChanges ?? false },
  );
  // From here on only ids and totals are needed: the priced requests are in the store (or going in).
  const changedRefused = upsert.changed.length > 0 && !o.acceptChanges;
  if (shared) {
    const storing = sharedStoring(store, { runId, holder, ttl, o }, { rows: shared, stored: first });
    return { upsert, changedRefused, storing };
  }
  const allStored =
    changedRefused || !digest ? undefined : keepPlan(store, runId, plan.taskIds.length, digest);
  return { upsert, changedRefused, storing: storingTheRest(store, runId, plan, rows, first, allStored) };
}

/**
 * A fleet's run whose workers all stopped before its plan was stored (its plan marked still being stored):
 * with the same plan (its digest, the whole plan's), nothing stored is compared again, and the rest is
 * stored while this worker works, as it was. Another plan: undefined, stored and compared at once.
 */
function resumeStoring(
  store: Store,
  o: OpenRunOptions,
  r: { runId: string; existing: RunRecord | undefined; holder: string; ttl: number },
):
  | { upsert: UpsertResult; changedRefused: false; storing: SharedStoring; pending: PendingModel[] }
  | undefined {
  const { plan } = o;
  const { runId, existing } = r;
  const all = storedFirst(plan, o.storeFirst) === Number.POSITIVE_INFINITY;
  if (all || existing?.planTasks !== plan.taskIds.length || existing.planDigest !== digestOf(plan)) {
    return undefined;
  }
  // What the rows not stored come to (the preflight's): a pass over the plan, as its first worker's.
  const stored = storedOf(store, runId);
  const later = new Map<string, PendingModel>();
  let position = 0;
  for (const row of plan.rows({ withoutCallback: true })) {
    if (position++ < stored) continue;
    const m = later.get(row.model) ?? { model: row.model, tasks: 0, tokens: 0, min: 0, max: 0 };
    later.set(row.model, {
      model: m.model,
      tasks: m.tasks + 1,
      tokens: m.tokens + row.estimate.tokens,
      min: m.min + row.estimate.min,
      max: m.max + row.estimate.max,
    });
  }
  return {
    upsert: { inserted: 0, unchanged: stored, updated: [], changed: [], missing: [] },
    changedRefused: false,
    storing: sharedStoring(store, { runId, holder: r.holder, ttl: r.ttl, o }),
    pending: withLater(store.tasks.pendingByModel(runId), later),
  };
}

/** The pending tasks stored, per model, with those still to store added. */
function withLater(stored: PendingModel[], later: Map<string, PendingModel>): PendingModel[] {
  const sum = (a: PendingModel, b: PendingModel | undefined): PendingModel =>
    b === undefined
      ? a
      : {
          ...a,
          tasks: a.tasks + b.tasks,
          tokens: a.tokens + b.tokens,
          min: a.min + b.min,
          max: a.max + b.max,
        };
  const models = new Set(stored.map((m) => m.model));
  return [
    ...stored.map((m) => sum(m, later.get(m.model))),
    ...[...later.values()].filter((m) => !models.has(m.model)),
  ];
}

/** What an opening holds, given back when `signal` aborts it; `check` ends an aborted opening with a line. */
interface Opening {
  /** The opening is over (the run starts, or the session closes): an abort no longer gives anything back. */
  end(): void;
  /** Throws the interrupted opening's RunError once aborted. */
  check(runId: string): void;
}

function whileOpening(signal: AbortSignal | undefined, giveBack: () => void): Opening {
  if (signal === undefined) return { end: () => {}, check: () => {} };
  let open = true;
  const onAbort = () => {
    if (open) giveBack();
  };
  signal.addEventListener('abort', onAbort, { once: true });
  // Aborted before the lease was taken: given back as soon as it is.
  if (signal.aborted) onAbort();
  return {
    end: () => {
      open = false;
      signal.removeEventListener('abort', onAbort);
    },
    check: (runId) => {
      if (signal.aborted) throw interruptedOpening(runId);
    },
  };
}

/** The error of an opening ended by its signal (nothing was submitted). */
export function interruptedOpening(runId: string): RunError {
  return new RunError(
    'interrupted',
    `interrupted while opening run ${runId}: nothing was submitted; run the same command again`,
  );
}

/**
 * A new run of a fleet whose tasks are stored while its workers work: its whole plan's digest and count
 * are recorded before its first task (a pass over the plan: the same a worker joining makes), with the
 * mark that the rest is still to be stored, and this worker takes the storing lease. The plan's rows, for
 * the store to take.
 */
function sharePlan(
  store: Store,
  runId: string,
  plan: PlannedRun,
  holder: string,
  ttl: number,
): Iterator<NewTask> {
  store.runs.setPlan(runId, { tasks: plan.taskIds.length, digest: digestOf(plan), storing: true });
  store.leases.acquireLease(storingLeaseName(runId), holder, ttl);
  return plan.rows({ withoutCallback: true })[Symbol.iterator]();
}

/** This worker's part in storing a fleet's run: storing the rest (`storing`), or following and taking over. */
function sharedStoring(
  store: Store,
  w: { runId: string; holder: string; ttl: number; o: OpenRunOptions },
  storing?: { rows: Iterator<NewTask>; stored: number },
): SharedStoring {
  const { plan } = w.o;
  return new SharedStoring({
    store,
    runId: w.runId,
    holder: w.holder,
    ttlMs: w.ttl,
    total: plan.taskIds.length,
    rows: () => plan.rows({ withoutCallback: true })[Symbol.iterator](),
    ...(plan.longestFrom ? { longestFrom: plan.longestFrom.bind(plan) } : {}),
    pollMs: Math.min(1_000, w.ttl / 8),
    release: () => plan.release(),
    // As many rows a transaction as the worker that opened the run stored first, 2,000 at most.
    chunk: Math.min(STORE_CHUNK, storedFirst(plan, w.o.storeFirst)),
    ...(storing ? { storing } : {}),
  });
}

/**
 * A run is one batch. Another manifest that names the same run (two files with the same `name:`, or
 * `--run-id` of another manifest's run) is refused before anything of it is stored: going on would add
 * its tasks to the other batch's run, one run, one report and one budget for both. The same manifest
 * moved (its plan the run's) goes on; one moved and edited goes on with --accept-changes, which says it.
 */
function refuseAnotherBatch(o: OpenRunOptions, runId: string, existing: RunRecord): void {
  if (existing.manifestPath === o.manifestPath || o.acceptChanges === true) return;
  // The plan's digest is the run's once all its tasks were stored (a run of an older mediabatch has none).
  const samePlan =
    existing.planDigest !== null &&
    existing.planTasks === o.plan.taskIds.length &&
    existing.planDigest === digestOf(o.plan);
  if (samePlan) return;
  const shown = o.shown ?? ((p: string) => p);
  const [started, asked] = [shown(existing.manifestPath), shown(o.manifestPath)];
  throw new RunError(
    'invalid',
    `run ${runId} was started from ${started}, and ${asked} is another batch with the same run id (its tasks or requests differ): give ${asked} a \`name:\` of its own, or run it with --run-id and another id; if it is ${started} moved and edited, --accept-changes goes on with run ${runId}`,
  );
}

/**
 * The plan the run's tasks are stored from, kept with the run: its task count now, its digest once every
 * task of it is stored (a worker joining compares them, and waits for the digest while only the count is
 * there). With rows still to store, what to call once they are.
 */
function keepPlan(store: Store, runId: string, tasks: number, digest: PlanDigest): (() => void) | undefined {
  const storedAll = digest.tasks === tasks;
  store.runs.setPlan(runId, { tasks, digest: storedAll ? digest.hex() : null });
  return storedAll ? undefined : () => store.runs.setPlan(runId, { tasks, digest: digest.hex() });
}

/** One token per run, kept, so that a restarted run still accepts callbacks for jobs sent before. */
function keptCallbackToken(
  store: Store,
  runId: string,
  existing: RunRecord | undefined,
  wanted: boolean,
): string | null {
  const kept = existing?.callbackToken ?? null;
  if (!wanted || kept) return kept;
  const token = newCallbackToken();
  store.runs.setCallbackToken(runId, token);
  return token;
}

/**
 * How the first process of a run holds it: alone on a SQLite file (its lease, renewed); on PostgreSQL as
 * the first worker, whose opening lease is given back once it starts working (its worker row then).
 */
function leaseParts(
  store: Store,
  l: { runId: string; leaseName: string; holder: string; ttl: number; fleet: boolean },
  opening: Opening,
): Pick<RunSession, 'fleet' | 'startWorking' | 'renew' | 'leaseTtlMs'> {
  const { runId, leaseName, holder, ttl, fleet } = l;
  return {
    fleet: fleet ? { joined: false, workers: 1, ttlMs: ttl } : undefined,
    startWorking: () => {
      // The run takes its signals from here on (a stop records the answers in flight, then closes).
      opening.end();
      if (!fleet) return;
      store.workers.join(runId, holder, hostname(), process.pid, ttl);
      store.leases.releaseLease(leaseName, holder);
    },
    renew: () => fleet || store.leases.renewLease(leaseName, holder, ttl),
    leaseTtlMs: ttl,
  };
}

/** The rows after the first `first`, stored while the run runs; none left: the plan's rows are released. */
function storingTheRest(
  store: Store,
  runId: string,
  plan: PlannedRun,
  rows: Iterator<NewTask>,
  first: number,
  allStored: (() => void) | undefined,
): BackgroundStoring | undefined {
  if (first >= plan.taskIds.length || !plan.longestFrom) {
    plan.release();
    return undefined;
  }
  return new BackgroundStoring({
    store,
    runId,
    rows,
    stored: first,
    total: plan.taskIds.length,
    longestFrom: plan.longestFrom.bind(plan),
    release: () => plan.release(),
    chunk: Math.min(STORE_CHUNK, first),
    ...(allStored ? { allStored } : {}),
  });
}

/** A bucket has no folder to claim: its run prefix is named after the run, and the state file keeps it. */
async function claimFolder(
  runDir: string,
  stateFile: string,
  runId: string,
  shown: (p: string) => string,
  refuse: (code: number) => void,
): Promise<void> {
  try {
    if (!isBucketLocation(runDir)) await claimRunFolder(runDir, stateFile, runId, shown);
  } catch (error) {
    if (error instanceof RunFolderTakenError) {
      refuse(EXIT.invalid);
      throw new RunError('invalid', error.message);
    }
    // An unwritable folder is reported by the preflight's own check, before anything is submitted.
  }
}

/** Tasks already sent whose request changed: nothing is sent again without --accept-changes. */
function changedError(changed: UpsertResult['changed'], manifest: string): RunError {
  const n = changed.length;
  return new RunError(
    'invalid',
    `${n} task${n === 1 ? ' was' : 's were'} already sent with a different request; run again with --accept-changes to submit ${n === 1 ? 'it' : 'them'} anew (charged again), or restore the manifest`,
    changed.map(
      (c) =>
        `  ${c.taskId} (${c.state.replace('_', ' ')}): the request in ${manifest} changed since it was sent`,
    ),
  );
}

/** --retry-failed and --retry-in-doubt: those tasks back to pending. */
function requeue(
  store: Store,
  runId: string,
  o: { retryFailed?: boolean; retryInDoubt?: boolean },
): { failed: string[]; inDoubt: string[] } {
  const requeued = { failed: [] as string[], inDoubt: [] as string[] };
  if (o.retryFailed) {
    const again = store.tasks.tasksByState(runId, ['failed', 'rejected']).map((t) => t.taskId);
    requeued.failed = store.tasks.requeueTasks(runId, again, ['failed', 'rejected']);
  }
  if (o.retryInDoubt) {
    const inDoubt = store.tasks.tasksByState(runId, ['in_doubt']).map((t) => t.taskId);
    requeued.inDoubt = store.tasks.requeueTasks(runId, inDoubt, ['in_doubt']);
  }
  return requeued;
}

/**
 * How many tasks a new run stores before it starts: all of them unless the plan can say which stored
 * task may go first (the longest expected) and nothing needs every row first: chains (links to their
 * upstreams), local files (uploaded before the first POST).
 */
function storedFirst(plan: PlannedRun, storeFirst: number | undefined): number {
  if (!plan.longestFrom || !plan.totals || plan.chained !== false || plan.localInputs !== false) {
    return Number.POSITIVE_INFINITY;
  }
  return storeFirst ?? STORE_FIRST;
}

function plannedPending(plan: PlannedRun): PendingModel[] {
  return Object.entries(plan.totals?.byModel ?? {}).map(([model, m]) => ({
    model,
    tasks: m.tasks,
    tokens: m.tokens,
    min: m.min,
    max: m.max,
  }));
}

/** The digest of a plan's rows (src/store/plan-digest.ts), made once per plan: a pass over every task. */
const digests = new WeakMap<PlannedRun, string>();
function digestOf(plan: PlannedRun): string {
  let digest = digests.get(plan);
  if (digest === undefined) {
    digest = planDigestOf(plan.rows({ withoutCallback: true }));
    digests.set(plan, digest);
  }
  return digest;
}

/** The plan's rows without their callback, each added to `digest` as the store takes it. */
function digestedRows(plan: PlannedRun): { rows: Iterator<NewTask>; digest: PlanDigest } {
  const digest = new PlanDigest();
  const rows = plan.rows({ withoutCallback: true })[Symbol.iterator]();
  function* digested(): Generator<NewTask> {
    for (let r = rows.next(); !r.done; r = rows.next()) {
      digest.add(r.value);
      yield r.value;
    }
  }
  return { rows: digested(), digest };
}

function* take<T>(items: Iterator<T>, n: number): Generator<T> {
  for (let i = 0; i < n; i++) {
    const r = items.next();
    if (r.done) return;
    yield r.value;
  }
}

/** The run to drive: a shard's own (refusals as RunErrors), or the manifest's. */
function chooseRunOrShard(store: Store, o: OpenRunOptions): RunChoice {
  const input = {
    manifestPath: o.manifestPath,
    manifestName: o.plan.settings.name,
    templateRunId: o.plan.settings.runId,
    ...(o.runId !== undefined ? { explicitRunId: o.runId } : {}),
    ...(o.newRun ? { newRun: true } : {}),
  };
  if (!o.shard) {
    const choice = chooseRun(store, input);
    const shard = parseShardRunId(choice.runId)?.shard;
    // The whole manifest upserted into one shard's run would send the other shards' tasks again.
    if (shard) {
      throw new RunError(
        'invalid',
        `run ${choice.runId} of this manifest is unfinished, and it is shard ${shard.index} of ${shard.count}: resume it with --shard ${shard.index}/${shard.count}, or start another run (--new-run)`,
      );
    }
    return choice;
  }
  try {
    return chooseShardRun(store, input, o.shard);
  } catch (error) {
    if (error instanceof ShardRunError) throw new RunError('invalid', error.message);
    throw error;
  }
}

/** Workers of the run alive now (not stopped, not lost). */
function liveWorkers(store: Store, runId: string): number {
  return store.workers.list(runId).filter((w) => w.stoppedAt === undefined && !w.lost).length;
}

/** How long a worker waits, by default, for another's opening; then it says the run is busy. */
const OPENING_WAIT_MS = 10 * 60_000;

/** The opening lease of a fleet's run: taken once the worker opening it (planning, asking) is done. */
async function takeOpeningLease(
  store: Store,
  l: { runId: string; leaseName: string; holder: string; ttl: number },
  o: { openingWaitMs?: number; signal?: AbortSignal },
): Promise<void> {
  const until = Date.now() + (o.openingWaitMs ?? OPENING_WAIT_MS);
  for (;;) {
    if (o.signal?.aborted) throw interruptedOpening(l.runId);
    try {
      takeLease(store, l.runId, l.leaseName, l.holder, l.ttl);
      return;
    } catch (error) {
      if (!(error instanceof RunError) || Date.now() >= until) throw error;
      await pause(250, o.signal);
    }
  }
}

/** Waits `ms`, or less when `signal` aborts. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * A later worker of a run already being worked on: the run's tasks, money and preflight are the first
 * worker's; this one checks it talks to the same API with the same key, writes to the same output, and
 * brings the same budget and plan, and joins.
 */
async function joinRun(
  store: Store,
  j: {
    o: OpenRunOptions;
    runId: string;
    runDir: string;
    existing: RunRecord;
    choice: RunChoice;
    holder: string;
    leaseName: string;
    ttl: number;
  },
): Promise<RunSession> {
  const { runId, holder, leaseName, ttl } = j;
  try {
    const problem = apiMismatch(runId, j.existing.api, j.o.api);
    if (problem) throw new RunError('invalid', problem);
    const kept = keptSettings(j.existing).output;
    const output = j.o.plan.settings.output;
    if (kept !== undefined && kept !== output) {
      // Workers of one run write to one place: a worker with another output would split its results.
      const named = shownOutput(j.o.shown);
      throw new RunError(
        'invalid',
        `run ${runId} writes its results to ${named(runLocation(kept, runId))}, and this worker's manifest says output: ${named(output)}: give every worker of the run the same output`,
      );
    }
    const budgetProblem = budgetMismatch(j.o, runId, j.existing);
    if (budgetProblem) throw new RunError('invalid', budgetProblem);
  } finally {
    store.leases.releaseLease(leaseName, holder);
  }
  // The plan's check is a pass over the plan (and maybe a wait for the run's digest): made after the
  // opening lease is given back, so that the workers of a large fleet joining at once make it side by side.
  const planProblem = await planMismatch(store, j.o, runId, j.existing);
  if (planProblem) throw new RunError('invalid', planProblem);
  if (j.o.signal?.aborted) throw interruptedOpening(runId);
  store.workers.join(runId, holder, hostname(), process.pid, ttl);
  // A plan still being stored (its digest, the whole plan's, is this worker's): this worker follows what is
  // stored, and stores the rest if the worker storing it goes.
  const storing = store.runs.getRun(runId)?.planStoring
    ? sharedStoring(store, { runId, holder, ttl, o: j.o })
    : undefined;
  const leave = () => {
    storing?.stop();
    store.claims.leave(runId, holder);
  };
  const opening = whileOpening(j.o.signal, leave);
  return {
    store,
    runId,
    runDir: j.runDir,
    existing: j.existing,
    choice: j.choice,
    upsert: { inserted: 0, unchanged: 0, updated: [], changed: [], missing: [] },
    recovered: [],
    requeued: { failed: [], inDoubt: [] },
    unblocked: [],
    storing,
    plannedPending: undefined,
    callbackToken: j.existing.callbackToken,
    leaseName,
    holder,
    fleet: { joined: true, workers: liveWorkers(store, runId), ttlMs: ttl },
    startWorking: () => opening.end(),
    refuse: () => {},
    renew: () => true,
    leaseTtlMs: ttl,
    close: () => {
      opening.end();
      leave();
    },
  };
}

/**
 * A worker joining a run runs the tasks the run stored, whatever its own manifest says: one whose plan is
 * not the run's (tasks, requests or prices edited since) would let its user believe the edit runs. A run
 * whose first worker is still storing its plan has its task count only: the digest is waited for (the
 * opening's wait at most). A run made before runs kept their plan has neither, and is joined as before.
 */
async function planMismatch(
  store: Store,
  o: OpenRunOptions,
  runId: string,
  existing: RunRecord,
): Promise<string | undefined> {
  if (existing.planDigest === null && existing.planTasks === null) return undefined;
  const manifest = (o.shown ?? ((p: string) => p))(o.manifestPath);
  const mismatch = `${manifest} is not the plan run ${runId} is running (its tasks, requests or prices were edited since the run's first worker stored them): give every worker of the run the same manifest, or stop the run's workers and run again to run the edited one`;
  if (existing.planTasks !== null && existing.planTasks !== o.plan.taskIds.length) return mismatch;
  const mine = digestOf(o.plan);
  const until = Date.now() + (o.openingWaitMs ?? OPENING_WAIT_MS);
  let kept = existing.planDigest;
  while (kept === null) {
    if (Date.now() >= until || liveWorkers(store, runId) === 0) {
      throw new RunError(
        'busy',
        `run ${runId}'s plan of ${fmtCount(existing.planTasks ?? 0)} tasks is not all stored yet (its first worker stores it while it works), and this worker compares its own plan with it before it joins: run it again in a while`,
      );
    }
    await pause(250, o.signal);
    if (o.signal?.aborted) throw interruptedOpening(runId);
    kept = store.runs.getRun(runId)?.planDigest ?? null;
  }
  return kept === mine ? undefined : mismatch;
}

/**
 * The run's budget is one for all its workers, held in the database, and a worker starting to work sets it
 * as its own: one with another budget (its manifest's or --budget) would change it for every worker,
 * without the preflight the run's first worker made.
 */
function budgetMismatch(o: OpenRunOptions, runId: string, existing: RunRecord): string | undefined {
  const kept = keptSettings(existing).budget;
  const mine = o.plan.settings.budget;
  if (kept === mine) return undefined;
  const shownBudget = (b: number | undefined) =>
    b === undefined ? 'no budget' : `a budget of ${fmtTokens(b)} tokens`;
  return `run ${runId} runs under ${shownBudget(kept)}, and this worker has ${shownBudget(mine)} (its manifest's budget, or --budget): give every worker of the run the same budget, or stop the run's workers and run again with the new one`;
}

/**
 * Takes the run's lease: on a PostgreSQL state only for the opening (workers wait for each other's
 * opening). Returns the last sign of work on the run read before, while a dead holder's lease still says it.
 */
async function takeRunLease(
  store: Store,
  l: { runId: string; leaseName: string; holder: string; ttl: number; fleet: boolean },
  o: { openingWaitMs?: number; signal?: AbortSignal },
): Promise<Date | undefined> {
  const lastSign = lastSignOfWork(store, l.runId);
  if (l.fleet) await takeOpeningLease(store, l, o);
  else takeLease(store, l.runId, l.leaseName, l.holder, l.ttl);
  return lastSign;
}

function takeLease(store: Store, runId: string, name: string, holder: string, ttl: number): void {
  let lease = store.leases.acquireLease(name, holder, ttl);
  if (!lease.acquired && holderIsDead(lease.holder)) {
    // kill -9 or a crash left the lease behind: resuming at once must not wait for it to expire.
    store.leases.releaseLease(name, lease.holder);
    lease = store.leases.acquireLease(name, holder, ttl);
  }
  if (!lease.acquired) {
    // One line: who drives it, since when, and until when at least (a dead holder's lease runs out then).
    const since = store.leases.getLease(name)?.acquiredAt;
    throw new RunError(
      'busy',
      `run ${runId} is being driven by another mediabatch (${lease.holder})${since ? ` since ${since.toISOString()}` : ''} until at least ${lease.expiresAt.toISOString()}: wait for it to finish, then run again`,
    );
  }
}

/** A new run is created bound to this API; an existing one must belong to it (or have spent nothing). */
function bindOrCreate(store: Store, runId: string, existing: RunRecord | undefined, o: OpenRunOptions): void {
  if (!existing) {
    store.runs.createRun({
      id: runId,
      manifestPath: o.manifestPath,
      manifestName: o.plan.settings.name,
      settings: o.settingsToKeep,
      api: o.api,
    });
    return;
  }
  const problem = apiMismatch(runId, existing.api, o.api);
  if (problem) {
    // A run that never had a job accepted (a refused key, a wrong URL) owes nothing where it was: it moves.
    const counts = store.tasks.countTasksByState(runId);
    const mayHaveSpent =
      store.ledger.runSpent(runId).charged > 0 || counts.in_doubt > 0 || counts.submitting > 0;
    if (mayHaveSpent) throw new RunError('invalid', problem);
    store.runs.bindRunToApi(runId, o.api, { force: true });
  } else if (existing.api === null) store.runs.bindRunToApi(runId, o.api);
}

/**
 * The output a resumed run writes to is the manifest's: while nothing of the run was written where it first
 * pointed (no result file, nothing done or being downloaded), the run follows the manifest and records it;
 * once results are there, they would be split between two places, so the run is refused in one line.
 */
function followOutput(
  store: Store,
  existing: RunRecord,
  o: OpenRunOptions,
  shown: (p: string) => string,
): { from: string; to: string } | undefined {
  const output = o.plan.settings.output;
  const kept = keptSettings(existing).output;
  if (kept === undefined || kept === output) return undefined;
  const runId = existing.id;
  const from = runLocation(kept, runId);
  const named = shownOutput(shown);
  const counts = store.tasks.countTasksByState(runId);
  const written = counts.done + counts.downloading;
  if (written > 0 || store.files.hasFiles(runId)) {
    throw new RunError(
      'invalid',
      `run ${runId} has results in ${named(from)}${written > 0 ? ` (${written} task(s) done or downloading)` : ''}, and the manifest now says output: ${named(output)}: set output back to ${named(kept)} to resume it there, or give the new output a run of its own (--run-id ${runId}-2)`,
    );
  }
  const settings =
    typeof existing.settings === 'object' && existing.settings !== null ? existing.settings : {};
  store.runs.updateRunSettings(runId, {
    ...settings,
    output,
    ...outputFlag(existing.settings, o.settingsToKeep),
  });
  return { from, to: runLocation(output, runId) };
}

/**
 * The recorded flags of a run whose output moved: whether results may go to a local folder of a PostgreSQL
 * state (--allow-local-output) goes with the output, so the commands printed about the run carry it as this
 * run was given it. Nothing changes for a caller that records no flags (the library, schedule).
 */
function outputFlag(kept: unknown, now: unknown): { invocation?: RecordedInvocation } {
  if ((now as { invocation?: unknown } | null)?.invocation === undefined) return {};
  const { allowLocalOutput: _, ...rest } = recordedInvocation(kept);
  return {
    invocation: { ...rest, ...(recordedInvocation(now).allowLocalOutput ? { allowLocalOutput: true } : {}) },
  };
}

/**
 * A run continued with or without --allow-partial records it as this opening was given it: the commands
 * printed about the run (its last line, `status`, the report) carry it, so that the one typed continues the
 * run as it was last run, not refused by a preflight that --allow-partial let through. Nothing changes for
 * a caller that records no flags (the library, schedule).
 */
function followPartial(store: Store, runId: string, now: unknown): void {
  if ((now as { invocation?: unknown } | null)?.invocation === undefined) return;
  const settings = store.runs.getRun(runId)?.settings;
  const kept = recordedInvocation(settings);
  const partial = recordedInvocation(now).allowPartial === true;
  if ((kept.allowPartial === true) === partial) return;
  const { allowPartial: _, ...rest } = kept;
  store.runs.updateRunSettings(runId, {
    ...(typeof settings === 'object' && settings !== null ? settings : {}),
    invocation: { ...rest, ...(partial ? { allowPartial: true } : {}) },
  });
}

/** How a line names an output: a bucket as it is, a folder as the user reaches it. */
function shownOutput(shown: ((p: string) => string) | undefined): (p: string) => string {
  return (p) => (isBucketLocation(p) || shown === undefined ? p : shown(p));
}

/** One line when a run would be resumed against another API or key than the one it was started with. */
function apiMismatch(
  runId: string,
  bound: { baseUrl: string; keyFingerprint: string } | null,
  now: { baseUrl: string; keyFingerprint: string },
): string | undefined {
  if (bound === null) return undefined;
  if (bound.baseUrl === now.baseUrl && bound.keyFingerprint === now.keyFingerprint) return undefined;
  const what =
    bound.baseUrl !== now.baseUrl
      ? `it belongs to ${bound.baseUrl}, and this would use ${now.baseUrl}`
      : `it belongs to the API key with fingerprint ${bound.keyFingerprint}, and MEDIABATCH_API_KEY now has fingerprint ${now.keyFingerprint}`;
  return `run ${runId} cannot be resumed here: ${what}. Use the API and key it was started with, or start another run (--new-run, --run-id, or another --state)`;
}

/** The state a run ends in: finished when nothing is left to do and nothing stopped it early. */
export function finalRunState(unfinished: number, stopped: boolean): RunState {
  return unfinished === 0 && !stopped ? 'finished' : 'interrupted';
}
