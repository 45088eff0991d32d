import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { type ApiClient, createApiClient } from '../../api/client.js';
import { downloadResult } from '../../api/download.js';
import { findEntry, roundTokens } from '../../catalog/index.js';
import type { Config } from '../../config.js';
import { writeReport } from '../../report/index.js';
import {
  CALLBACK_PATH,
  type CallbackHint,
  type CallbackReceiver,
  callbackBaseProblem,
  callbackKey,
  callbackUrlFor,
  newCallbackToken,
  parseListen,
  startCallbackReceiver,
} from '../../run/callbacks.js';
import { checkOutputFolder, expectedResultBytes } from '../../run/disk.js';
import { type RunEvent, stamp } from '../../run/events.js';
import { holderIsDead, runLeaseName } from '../../run/lease.js';
import { claimRunFolder, RunFolderTakenError } from '../../run/marker.js';
import { DEFAULT_POLL_PROFILES, fallbackProfiles, scaleProfiles } from '../../run/polling.js';
import { decidePreflight } from '../../run/preflight.js';
import { ProgressView } from '../../run/progress.js';
import { ageOf, chooseRun } from '../../run/resume.js';
import { DEFAULT_WATCH_POLICY, Runner, type RunResult, type WatchPolicy } from '../../run/runner.js';
import { selectTasks } from '../../run/select.js';
import { sandboxVars } from '../../sandbox/media.js';
import { SANDBOX_DEFAULTS } from '../../sandbox/options.js';
import { startSandbox } from '../../sandbox/server.js';
import {
  keyFingerprint,
  leaseHolder,
  openStore,
  periodOf,
  type Store,
  type TaskState,
  UNFINISHED,
} from '../../store/index.js';
import type { Logger } from '../../util/log.js';
import { registerSecret, scrub } from '../../util/secrets.js';
import { EXIT, ExitError } from '../errors.js';
import { fmtRange, fmtTokens, fmtUsd, table } from '../format.js';
import type { CliIO } from '../io.js';
import { makeMeasure, unauthorizedError } from '../wiring.js';
import { buildRunPlan, type RunPlan } from './plan.js';

export interface RunFlags {
  yes?: boolean;
  allowPartial?: boolean;
  retryInDoubt?: boolean;
  acceptChanges?: boolean;
  concurrency?: number;
  /** Replaces every task's `retries` for this run. */
  retries?: number;
  /** Task ids or globs, comma-separated: only these are submitted. */
  only?: string;
  /** Submit at most this many pending tasks. */
  limit?: number;
  /** Send failed (refunded) and rejected tasks back to pending first. */
  retryFailed?: boolean;
  /** NDJSON events on stdout (./../../run/events.ts); the human display goes to stderr. */
  json?: boolean;
  sandbox?: boolean;
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
}

export interface RunContext {
  io: CliIO;
  config: Config;
  statePath: string;
  logger: Logger;
  /** Tests shorten polling; the default is the real schedule (scaled with --sandbox). */
  pollScale?: number;
}

const LEASE_TTL_MS = 60_000;
const SANDBOX_KEY = 'sandbox-key';

/** preflight, then submit, watch, download; resumes the run when it exists and is unfinished. */
export async function runCommand(file: string, flags: RunFlags, ctx: RunContext): Promise<number> {
  const { io, config } = ctx;
  let baseUrl = config.baseUrl;
  let apiKey = config.apiKey;
  const sandbox = flags.sandbox ? await startEmbeddedSandbox(flags.sandboxSpeed ?? 0.1) : undefined;
  try {
    if (sandbox) {
      baseUrl = sandbox.baseUrl;
      apiKey = SANDBOX_KEY;
      humanOut(io, flags).write(`Using the embedded sandbox at ${sandbox.baseUrl} (no account, no money).\n`);
    }
    if (!apiKey) {
      throw new ExitError(
        EXIT.invalid,
        'no API key: set MEDIABATCH_API_KEY (or try it for free with --sandbox)',
      );
    }
    if (!baseUrl) {
      throw new ExitError(
        EXIT.invalid,
        'no API base URL: set MEDIABATCH_BASE_URL or base_url in mediabatch.config.yaml (or use --sandbox)',
      );
    }
    registerSecret(apiKey);
    const client = createApiClient({ baseUrl, apiKey });
    try {
      return await runWithClient(file, flags, ctx, client, keyFingerprint(apiKey), Boolean(sandbox));
    } finally {
      await client.close();
    }
  } finally {
    await sandbox?.close();
  }
}

async function runWithClient(
  file: string,
  flags: RunFlags,
  ctx: RunContext,
  client: ApiClient,
  fingerprint: string,
  onSandbox: boolean,
): Promise<number> {
  const { io, config } = ctx;
  const plan = await buildRunPlan(file, {
    io,
    config,
    ...(flags.probe === false ? {} : { measure: makeMeasure() }),
    allowOutside: flags.allowOutsideData ?? false,
    ...(onSandbox ? { vars: sandboxVars(client.baseUrl) } : {}),
  });
  const settings = plan.settings;
  let only: string[] | undefined;
  if (flags.only !== undefined) {
    const selection = selectTasks(flags.only, plan.taskIds);
    if (!selection.ok) throw new ExitError(EXIT.invalid, selection.message);
    only = selection.taskIds;
  }
  if (flags.runId !== undefined && !/^[A-Za-z0-9_-]+$/.test(flags.runId)) {
    throw new ExitError(
      EXIT.invalid,
      `--run-id: must be letters, digits, - and _, got ${JSON.stringify(flags.runId)}`,
    );
  }
  const store = openStore(resolve(io.cwd, ctx.statePath), { now: io.now });
  const choice = chooseRun(store, {
    manifestPath: resolve(io.cwd, file),
    manifestName: settings.name,
    templateRunId: settings.runId,
    ...(flags.runId !== undefined ? { explicitRunId: flags.runId } : {}),
    ...(flags.newRun ? { newRun: true } : {}),
  });
  const runId = choice.runId;
  if (choice.resumed) {
    humanOut(io, flags).write(
      `Resuming run ${runId} of this manifest, started ${ageOf(choice.resumed, io.now())} ago and unfinished (pass --new-run to start ${settings.runId} instead).\n`,
    );
  }
  if (choice.leftBehind) {
    const { run, owed } = choice.leftBehind;
    humanOut(io, flags).write(
      `--new-run: run ${run.id} of this manifest is unfinished${owed > 0 ? ` and still owes ${owed} paid or possibly paid task(s); resume it later with --run-id ${run.id}` : ''}.\n`,
    );
  }
  const runDir = join(settings.output, runId);
  const holder = leaseHolder(process.pid, hostname(), randomBytes(4).toString('hex'));
  const leaseName = runLeaseName(runId);
  try {
    let lease = store.acquireLease(leaseName, holder, LEASE_TTL_MS);
    if (!lease.acquired && holderIsDead(lease.holder)) {
      // kill -9 or a crash left the lease behind: resuming at once must not wait for it to expire.
      store.releaseLease(leaseName, lease.holder);
      lease = store.acquireLease(leaseName, holder, LEASE_TTL_MS);
    }
    if (!lease.acquired) {
      throw new ExitError(
        EXIT.interrupted,
        `run ${runId} is being driven by another mediabatch (${lease.holder}) until at least ${lease.expiresAt.toISOString()}: wait for it to finish, then run again`,
      );
    }
    try {
      return await driveRun({
        file,
        flags,
        ctx,
        client,
        fingerprint,
        store,
        runId,
        runDir,
        holder,
        leaseName,
        plan,
        onSandbox,
        only,
      });
    } finally {
      store.releaseLease(leaseName, holder);
    }
  } finally {
    store.close();
  }
}

interface DriveArgs {
  file: string;
  flags: RunFlags;
  ctx: RunContext;
  client: ApiClient;
  fingerprint: string;
  store: Store;
  runId: string;
  runDir: string;
  holder: string;
  leaseName: string;
  plan: RunPlan;
  onSandbox: boolean;
  /** `--only`, resolved to task ids. */
  only: string[] | undefined;
}

async function driveRun(a: DriveArgs): Promise<number> {
  const { io, config } = a.ctx;
  const { store, runId, plan, flags } = a;
  const settings = plan.settings;
  const budget = [settings.budget, flags.budgetCap].reduce<number | undefined>(
    (min, b) => (b === undefined ? min : min === undefined ? b : Math.min(min, b)),
    undefined,
  );
  const out = (line = '') => humanOut(io, flags).write(`${line}\n`);
  // With --json, stdout carries one event per line and nothing else.
  const emit = (event: RunEvent) => {
    if (flags.json) io.stdout.write(`${scrub(JSON.stringify(event))}\n`);
  };
  const summary = (counts: Record<TaskState, number>, code: number) => {
    const spent = store.runSpent(runId);
    emit(
      stamp(
        {
          event: 'summary',
          counts,
          charged: spent.charged,
          refunded: spent.refunded,
          net: spent.net,
          exit_code: code,
        },
        runId,
        io.now(),
      ),
    );
  };
  const listen = flags.listen ?? settings.listen;
  const listenAt = listen === undefined ? undefined : parseListenOrExit(listen);
  const publicBase = flags.callbackUrl ?? settings.callbackUrl;
  if (listenAt && !publicBase && !a.onSandbox) {
    throw new ExitError(
      EXIT.invalid,
      '--listen needs --callback-url (or callback_url in the manifest): the public https address that reaches this receiver',
    );
  }
  const baseProblem = listenAt && publicBase !== undefined ? callbackBaseProblem(publicBase) : undefined;
  if (baseProblem) {
    throw new ExitError(
      EXIT.invalid,
      `${flags.callbackUrl !== undefined ? '--callback-url' : 'callback_url'}: ${baseProblem}`,
    );
  }
  if (flags.callbackUrl !== undefined && !listenAt) {
    // Without a receiver the flag would be dropped silently and the user would wait for callbacks.
    throw new ExitError(
      EXIT.invalid,
      '--callback-url needs --listen host:port (or listen in the manifest): the receiver this URL reaches',
    );
  }

  const existing = store.getRun(runId);
  // A run that never got going is `refused`; an older run stopped before it resumed stays as it was.
  const refuseRun = (code: number) => {
    if (!existing) store.markRunState(runId, 'refused', code);
  };
  // The embedded sandbox gets a new port at each start: its runs belong to "the embedded sandbox".
  const api = { baseUrl: a.onSandbox ? EMBEDDED_SANDBOX : a.client.baseUrl, keyFingerprint: a.fingerprint };
  if (existing) {
    const problem = apiMismatch(runId, existing.api, api);
    if (problem) {
      // A run that never had a job accepted (a refused key, a wrong URL) owes nothing where it was: it moves.
      const counts = store.countTasksByState(runId);
      const mayHaveSpent = store.runSpent(runId).charged > 0 || counts.in_doubt > 0 || counts.submitting > 0;
      if (mayHaveSpent) throw new ExitError(EXIT.invalid, problem);
      store.bindRunToApi(runId, api, { force: true });
    } else if (existing.api === null) store.bindRunToApi(runId, api);
  } else {
    store.createRun({
      id: runId,
      manifestPath: resolve(io.cwd, a.file),
      manifestName: settings.name,
      settings: { ...settings, concurrency: flags.concurrency ?? settings.concurrency },
      api,
    });
  }
  try {
    await claimRunFolder(a.runDir, resolve(io.cwd, a.ctx.statePath), runId, (p) => displayPath(io.cwd, p));
  } catch (error) {
    if (error instanceof RunFolderTakenError) {
      refuseRun(EXIT.invalid);
      throw new ExitError(EXIT.invalid, error.message);
    }
    // An unwritable folder is reported by the preflight's own check, before anything is submitted.
  }
  // One token per run, kept, so that a restarted run still accepts callbacks for jobs sent before.
  let callbackToken = existing?.callbackToken ?? null;
  if (listenAt && !callbackToken) {
    callbackToken = newCallbackToken();
    store.setCallbackToken(runId, callbackToken);
  }
  const upsert = store.upsertTasks(
    runId,
    // The callback URL is added when sending (see Runner): where answers go is not part of what a task
    // asks for, so changing it (or adding --listen) never makes a sent task look changed.
    plan.rows({ withoutCallback: true }),
    { acceptChanges: flags.acceptChanges ?? false },
  );
  // From here on only ids and totals are needed: the priced requests are in the store.
  plan.release();
  if (upsert.changed.length > 0 && !flags.acceptChanges) {
    refuseRun(EXIT.invalid);
    throw new ExitError(
      EXIT.invalid,
      `${upsert.changed.length} task${upsert.changed.length === 1 ? ' was' : 's were'} already sent with a different request; run again with --accept-changes to submit ${upsert.changed.length === 1 ? 'it' : 'them'} anew (charged again), or restore the manifest`,
      upsert.changed.map(
        (c) =>
          `  ${c.taskId} (${c.state.replace('_', ' ')}): the request in ${a.file} changed since it was sent`,
      ),
    );
  }
  if (upsert.changed.length > 0)
    out(
      `Resubmitting ${upsert.changed.length} changed task(s): ${upsert.changed.map((c) => c.taskId).join(', ')}`,
    );
  if (upsert.missing.length > 0) {
    out(`${upsert.missing.length} task(s) of run ${runId} are no longer in the manifest and are left alone.`);
  }
  const recovered = store.recoverInterruptedSubmissions(runId);
  if (recovered.length > 0) {
    out(
      `${recovered.length} task(s) were being submitted when the last run stopped; they are in doubt: ${recovered.join(', ')}`,
    );
  }
  if (flags.retryFailed) {
    const again = store.tasksByState(runId, ['failed', 'rejected']).map((t) => t.taskId);
    const requeued = store.requeueTasks(runId, again, ['failed', 'rejected']);
    if (requeued.length > 0)
      out(
        `--retry-failed: ${requeued.length} failed or rejected task(s) will be submitted again, each as a new attempt (failed jobs were refunded).`,
      );
  }
  if (flags.retryInDoubt) {
    const inDoubt = store.tasksByState(runId, ['in_doubt']).map((t) => t.taskId);
    const requeued = store.requeueTasks(runId, inDoubt, ['in_doubt']);
    if (requeued.length > 0)
      out(
        `--retry-in-doubt: ${requeued.length} task(s) will be submitted again (they may be charged twice).`,
      );
  }

  const counts = store.countTasksByState(runId);
  // The preflight prices what this run will submit: --only and --limit narrow it.
  const pendingModels = store.pendingByModel(runId, {
    ...(a.only !== undefined ? { only: a.only } : {}),
    ...(flags.limit !== undefined ? { limit: flags.limit } : {}),
  });
  const pendingCount = pendingModels.reduce((n, m) => n + m.tasks, 0);
  const toWatch = UNFINISHED.reduce((n, s) => (s === 'pending' ? n : n + counts[s]), 0);
  if (counts.pending === 0 && toWatch === 0) {
    const code = exitFor(undefined, counts);
    // Nothing happened: a finished run's times stay those of its real start and end.
    if (existing?.state !== 'finished') store.markRunState(runId, 'finished', code);
    out(
      `Run ${runId} is already complete: ${describeCounts(counts)}. Files are in ${displayPath(io.cwd, a.runDir)}.`,
    );
    await writeRunReport(store, runId, a.runDir, io, config, out);
    summary(counts, code);
    if (code !== EXIT.ok) throw new ExitError(EXIT.someFailed, failureLine(runId, counts));
    return code;
  }

  // ---- preflight ----
  const remainingMax = roundTokens(pendingModels.reduce((n, m) => n + m.max, 0));
  const remainingTokens = roundTokens(pendingModels.reduce((n, m) => n + m.tokens, 0));
  const remainingMin = roundTokens(pendingModels.reduce((n, m) => n + m.min, 0));
  const balanceOutcome = await a.client.getBalance();
  if (balanceOutcome.type === 'unauthorized') {
    refuseRun(EXIT.unauthorized);
    throw unauthorizedError();
  }
  const balance = balanceOutcome.type === 'ok' ? balanceOutcome.value : undefined;
  if (balance !== undefined && !existing) store.setRunBalance(runId, { before: balance });
  const quota = quotaFigures(store, config, a.fingerprint, io.now());
  const chargedSoFar = store.runSpent(runId).net;
  const decision = decidePreflight({
    remainingMax,
    remainingTokens,
    chargedSoFar,
    ...(balance !== undefined ? { balance } : {}),
    ...(quota ? { quota } : {}),
    ...(budget !== undefined ? { budget } : {}),
    allowPartial: flags.allowPartial ?? false,
  });

  out(
    existing
      ? `Resuming run ${runId} (${describeCounts(counts)})`
      : `Run ${runId}: ${plan.totals.tasks} tasks from ${a.file}`,
  );
  if (pendingCount > 0) {
    out(
      table([
        ['  MODEL', 'TASKS', 'TOKENS', 'USD'],
        ...pendingModels.map((m) => [
          `  ${m.model}`,
          String(m.tasks),
          fmtRange(roundTokens(m.tokens), roundTokens(m.min), roundTokens(m.max)),
          fmtUsd(roundTokens(m.max)),
        ]),
      ]),
    );
  }
  out(
    `  To submit: ${pendingCount} task(s), ${fmtRange(remainingTokens, remainingMin, remainingMax)} tokens (up to ${fmtUsd(remainingMax)})`,
  );
  if (toWatch > 0) out(`  Already submitted and still watched: ${toWatch}`);
  out(
    `  Balance: ${balance === undefined ? `unknown (${balanceOutcome.type === 'ok' ? '' : 'reason' in balanceOutcome ? balanceOutcome.reason : balanceOutcome.message})` : `${fmtTokens(balance)} tokens, ${fmtTokens(decision.leftAfter.balance ?? 0)} left after the run at most`}`,
  );
  if (quota) {
    out(
      `  Quota: ${fmtTokens(quota.used)} of ${fmtTokens(quota.limit)} tokens used this period (${quota.source}), ${fmtTokens(decision.leftAfter.quota ?? 0)} left after the run at most`,
    );
  } else out(`  Quota: unknown (set MEDIABATCH_QUOTA or quota: in mediabatch.config.yaml to check it)`);
  if (budget !== undefined) {
    out(
      `  Budget: ${fmtTokens(budget)} tokens${budget !== settings.budget ? ' (what is left of budget_per_period)' : ''}, ${fmtTokens(chargedSoFar)} charged so far, ${fmtTokens(decision.leftAfter.budget ?? 0)} left after the run at most`,
    );
  }
  if (pendingCount > 0) {
    const byKind: Partial<Record<'image' | 'audio' | 'video', number>> = {};
    for (const m of pendingModels) {
      const kind = findEntry(m.model)?.kind;
      if (kind) byKind[kind] = (byKind[kind] ?? 0) + m.tasks;
    }
    const disk = await checkOutputFolder(
      a.runDir,
      expectedResultBytes(byKind),
      displayPath(io.cwd, a.runDir),
    );
    if (!disk.ok && (disk.problem === 'unwritable' || !flags.allowPartial)) {
      refuseRun(EXIT.refused);
      throw new ExitError(EXIT.refused, `refused: ${disk.message}. Nothing was submitted`);
    }
    if (!disk.ok) out(`  --allow-partial: ${disk.message}`);
  }
  if (!decision.ok) {
    refuseRun(EXIT.refused);
    throw new ExitError(
      EXIT.refused,
      `refused: ${decision.refusals.join('; ')}. Nothing was submitted; raise the limit, shrink the manifest, or run with --allow-partial to stop cleanly when money runs out`,
    );
  }
  if (decision.refusals.length > 0)
    out(`  --allow-partial: ${decision.refusals.join('; ')}; the run stops cleanly when money runs out`);
  // A paid run never starts unconfirmed by accident: asked whenever a person can answer, refused when
  // nobody can (cron and CI pass --yes; `schedule` is its own confirmation).
  if (!flags.yes && pendingCount > 0) {
    if (!io.ask) {
      refuseRun(EXIT.refused);
      throw new ExitError(
        EXIT.refused,
        'not confirmed: standard input is not a terminal, so nobody can answer; add --yes to submit without asking',
      );
    }
    const answer = await io.ask(
      `Submit ${pendingCount} task(s) for up to ${fmtTokens(remainingMax)} tokens? [y/N] `,
    );
    if (answer !== true) {
      refuseRun(EXIT.refused);
      throw new ExitError(
        EXIT.refused,
        answer === 'interrupted'
          ? 'not confirmed (Ctrl-C); nothing was submitted'
          : 'not confirmed; nothing was submitted',
      );
    }
  }

  // ---- drive ----
  if (existing) store.markRunState(runId, 'running');
  const stop = new AbortController();
  const halt = new AbortController();
  const signals = io.signals;
  let interrupts = 0;
  const onSignal = (name: string) => {
    interrupts++;
    if (interrupts === 1 || name === 'SIGTERM') {
      io.stderr.write(
        '\nStopping: no new submissions; waiting for the answers in flight (Ctrl-C again to quit at once)\n',
      );
      stop.abort();
    } else {
      halt.abort();
      // Every submission sent has its intent row: quitting now leaves them in doubt, never charged twice.
      io.stderr.write(
        '\nQuit at once: tasks whose answer was not recorded are in doubt; run again to resume\n',
      );
      io.exit?.(EXIT.interrupted);
    }
  };
  const onInt = () => onSignal('SIGINT');
  const onTerm = () => onSignal('SIGTERM');
  signals?.on('SIGINT', onInt);
  signals?.on('SIGTERM', onTerm);

  const total = plan.totals.tasks;
  const view = new ProgressView({
    out: humanOut(io, flags),
    interactive: io.interactive,
    total: Object.values(store.countTasksByState(runId)).reduce((n, c) => n + c, 0),
    estimate: plan.totals.tokens,
  });
  const scale = a.ctx.pollScale ?? pollScaleFromEnv(io.env) ?? (a.onSandbox ? 0.1 : 1);
  let runnerRef: Runner | undefined;
  const receiver =
    listenAt && callbackToken
      ? await startReceiver(listenAt, callbackToken, plan.taskIds, a.ctx.logger, (hint) =>
          runnerRef?.hint(hint),
        )
      : undefined;
  const callbackBase = receiver ? (publicBase ?? receiver.localUrl) : undefined;
  if (receiver) {
    out(
      `  Callbacks: receiver on ${receiver.localUrl}; the service is told ${callbackBase}${CALLBACK_PATH}/…`,
    );
  }
  const profiles = scale === 1 ? DEFAULT_POLL_PROFILES : scaleProfiles(DEFAULT_POLL_PROFILES, scale);
  // Without a receiver, the manifest's callback_url goes to the service as it is (for a receiver of the user's).
  const plainCallback = settings.callbackUrl;
  const runner = new Runner(
    {
      store,
      client: a.client,
      keyFingerprint: a.fingerprint,
      logger: a.ctx.logger,
      download: downloadResult,
      onProgress: (p) => view.update(p),
      onEvent: emit,
    },
    {
      runId,
      runDir: a.runDir,
      concurrency: flags.concurrency ?? settings.concurrency,
      ...(budget !== undefined ? { budget } : {}),
      // Callbacks can be dropped after three failed attempts: polling stays on, slowly, as the safety net.
      pollProfiles: receiver ? fallbackProfiles(profiles, CALLBACK_FALLBACK_POLL_MS * scale) : profiles,
      ...(receiver && callbackBase && callbackToken
        ? { callbackUrlFor: (taskId: string) => callbackUrlFor(callbackBase, callbackToken, taskId) }
        : plainCallback
          ? { callbackUrlFor: () => plainCallback }
          : {}),
      pollConcurrency: 16,
      // Downloads are the slowest step per task (two fsyncs each); keep pace with what is in flight.
      downloadConcurrency: Math.max(4, Math.min(flags.concurrency ?? settings.concurrency, 32)),
      maxDownloadBytes: 2 * 1024 ** 3,
      downloadTimeoutMs: 60_000,
      submitRetries: 5,
      retryBaseMs: 500 * scale,
      retryCapMs: 30_000 * scale,
      giveUpAfterTasks: 3,
      ...(flags.retries !== undefined ? { retries: flags.retries } : {}),
      ...(a.only !== undefined ? { only: a.only } : {}),
      ...(flags.limit !== undefined ? { limit: flags.limit } : {}),
      watch: scaledWatchPolicy(scale),
      stop: stop.signal,
      halt: halt.signal,
    },
  );
  runnerRef = runner;
  const renew = setInterval(() => {
    if (!store.renewLease(a.leaseName, a.holder, LEASE_TTL_MS)) runner.leaseLost();
  }, LEASE_TTL_MS / 4);
  renew.unref();
  // The handlers stay until the command ends: a second Ctrl-C while the closing balance is fetched or
  // the report is written must still quit at once, not fall back to the default (a kill by SIGINT).
  try {
    let result: RunResult;
    try {
      result = await runner.run();
    } finally {
      clearInterval(renew);
      await receiver?.close();
      view.close();
    }

    const after = await a.client.getBalance();
    if (after.type === 'ok') store.setRunBalance(runId, { after: after.value });
    const code = exitFor(result.stopReason, result.counts);
    const unfinished = UNFINISHED.reduce((n, s) => n + result.counts[s], 0);
    store.markRunState(runId, unfinished === 0 && !result.stopReason ? 'finished' : 'interrupted', code);
    const report = await writeRunReport(store, runId, a.runDir, io, config);

    const spent = store.runSpent(runId);
    summary(result.counts, code);
    out('');
    out(`Run ${runId}: ${describeCounts(result.counts)}`);
    out(
      `  Charged ${fmtTokens(spent.charged)} tokens, refunded ${fmtTokens(spent.refunded)}, net ${fmtTokens(spent.net)} (${fmtUsd(spent.net)}); estimated ${fmtTokens(plan.totals.tokens)}`,
    );
    if (after.type === 'ok') out(`  Balance now: ${fmtTokens(after.value)} tokens`);
    for (const line of attentionLines(result)) out(line);
    if (result.counts.in_doubt > 0) {
      out(
        `  ${result.counts.in_doubt} task(s) in doubt: sent, but the answer was lost, so they may have been charged. They are not resubmitted; check your account, then run again with --retry-in-doubt to submit them anyway.`,
      );
    }
    if (receiver) {
      out(
        `  Results: ${result.arrivals.callback} arrived by callback, ${result.arrivals.poll} by polling (${receiver.stats.received} callbacks received, ${receiver.stats.ignored} ignored)`,
      );
    }
    out(`  Files: ${displayPath(io.cwd, a.runDir)}`);
    if (report) out(report);
    if (total !== result.counts.done && code === EXIT.someFailed)
      out('  `mediabatch status` lists what failed and why.');
    if (result.stopReason) {
      throw new ExitError(
        code as 4 | 5,
        result.stopMessage ?? `stopped (${result.stopReason}); run the same command again to continue`,
      );
    }
    if (code === EXIT.interrupted) {
      throw new ExitError(
        EXIT.interrupted,
        `${unfinished} task(s) are unfinished: run the same command again to continue`,
      );
    }
    if (code === EXIT.someFailed) throw new ExitError(EXIT.someFailed, failureLine(runId, result.counts));
    return code;
  } finally {
    signals?.off('SIGINT', onInt);
    signals?.off('SIGTERM', onTerm);
  }
}

/**
 * The embedded sandbox takes the port the example manifests name (`{{sandbox}}` defaults to
 * http://127.0.0.1:8787), so that their requests, which carry its address, are the same at every run; any
 * free port when that one is taken.
 */
async function startEmbeddedSandbox(speed: number) {
  try {
    return await startSandbox({ port: SANDBOX_DEFAULTS.port, speed, apiKey: SANDBOX_KEY });
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'EADDRINUSE') throw error;
    return startSandbox({ port: 0, speed, apiKey: SANDBOX_KEY });
  }
}

/** Where the lines for people go: stdout, or stderr when stdout carries --json events. */
function humanOut(io: CliIO, flags: RunFlags): CliIO['stdout'] {
  return flags.json ? io.stderr : io.stdout;
}

/** The base URL a run of the embedded sandbox is bound to (its port changes at every start). */
const EMBEDDED_SANDBOX = 'the embedded sandbox (--sandbox)';

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

/**
 * Writes report.json/csv/md and the gallery. A report that cannot be written is a warning: the money and
 * the files are recorded already, and `mediabatch report` can write it again.
 */
async function writeRunReport(
  store: Store,
  runId: string,
  runDir: string,
  io: CliIO,
  config: Config,
  print?: (line: string) => void,
): Promise<string | undefined> {
  try {
    const written = await writeReport(store, runId, runDir, {
      now: io.now(),
      ...(config.quota !== undefined ? { quota: config.quota } : {}),
    });
    const line = `  Report: ${displayPath(io.cwd, written.files.markdown)} · gallery: ${displayPath(io.cwd, written.files.gallery)}`;
    print?.(line);
    return line;
  } catch (error) {
    io.stderr.write(
      `warning: the report could not be written (${(error as Error).message}); run \`mediabatch report ${runId}\`\n`,
    );
    return undefined;
  }
}

/** With a receiver, our own polls only catch callbacks that never came. */
const CALLBACK_FALLBACK_POLL_MS = 60_000;

function parseListenOrExit(value: string): { host: string; port: number } {
  try {
    return parseListen(value);
  } catch (error) {
    throw new ExitError(EXIT.invalid, (error as Error).message);
  }
}

async function startReceiver(
  at: { host: string; port: number },
  token: string,
  taskIds: readonly string[],
  logger: Logger,
  onHint: (hint: CallbackHint) => Promise<boolean> | undefined,
): Promise<CallbackReceiver> {
  // Tasks the manifest no longer lists keep their jobs; their callbacks are ignored and polling finds them.
  const byKey = new Map(taskIds.map((id) => [callbackKey(id), id]));
  try {
    return await startCallbackReceiver({ ...at, token, taskForKey: (key) => byKey.get(key), onHint, logger });
  } catch (error) {
    throw new ExitError(
      EXIT.invalid,
      `--listen ${at.host}:${at.port}: cannot start the callback receiver (${(error as Error).message})`,
    );
  }
}

/**
 * MEDIABATCH_POLL_SCALE, for tests only (undocumented for users): multiplies every poll and retry delay
 * so that tests driving the CLI as a child process do not wait real seconds.
 */
function pollScaleFromEnv(env: NodeJS.ProcessEnv): number | undefined {
  const n = Number(env['MEDIABATCH_POLL_SCALE'] ?? '');
  return env['MEDIABATCH_POLL_SCALE'] && Number.isFinite(n) && n > 0 ? n : undefined;
}

function exitFor(stopReason: RunResult['stopReason'], counts: Record<TaskState, number>): number {
  if (stopReason === 'unauthorized') return EXIT.unauthorized;
  if (stopReason) return EXIT.interrupted;
  // Tasks left unfinished (retries exhausted, a job the API did not know, a download to retry) are
  // picked up by the next run: resumable, like an interruption.
  if (UNFINISHED.some((s) => counts[s] > 0)) return EXIT.interrupted;
  const bad = counts.failed + counts.rejected + counts.in_doubt + counts.blocked + counts.lost;
  return bad > 0 ? EXIT.someFailed : EXIT.ok;
}

/** The run's waits scale with the poll scale (the sandbox demo runs at a tenth of real timing). */
function scaledWatchPolicy(scale: number): Partial<WatchPolicy> {
  const d = DEFAULT_WATCH_POLICY;
  return {
    jobDeadlineMs: {
      image: d.jobDeadlineMs.image * scale,
      audio: d.jobDeadlineMs.audio * scale,
      video: d.jobDeadlineMs.video * scale,
    },
    stalledPollMs: d.stalledPollMs * scale,
    notFoundWindowMs: d.notFoundWindowMs * scale,
    successGraceMs: d.successGraceMs * scale,
    // Callbacks travel over the network whatever the scale: never less than a couple of seconds.
    doubtCallbackWaitMs: Math.max(2_000, d.doubtCallbackWaitMs * scale),
  };
}

/** What the user should know about tasks that are paid but not on disk, stalled, retried or recovered. */
function attentionLines(result: RunResult): string[] {
  const c = result.counts;
  const lines: string[] = [];
  if (c.unfetched > 0)
    lines.push(
      `  ${c.unfetched} task(s) unfetched: charged, but the result is not on disk yet. Run the same command again to fetch them.`,
    );
  if (c.stalled > 0)
    lines.push(
      `  ${c.stalled} task(s) stalled: no result long past the expected time. Still watched; run the same command again later.`,
    );
  if (c.lost > 0)
    lines.push(
      `  ${c.lost} task(s) paid, result lost: the service no longer has the job (\`mediabatch status\` says why).`,
    );
  if (result.retriedFailures > 0)
    lines.push(
      `  ${result.retriedFailures} failed job(s) submitted again (retries); the failed attempts were refunded.`,
    );
  if (result.recoveredFromDoubt > 0)
    lines.push(
      `  ${result.recoveredFromDoubt} task(s) recovered from doubt: a callback proved the job was accepted.`,
    );
  if (result.unreadableAnswers > 0)
    lines.push(
      `  ${result.unreadableAnswers} answer(s) from the API could not be read and were retried (see the log).`,
    );
  return lines;
}

/** The one line for exit 2: how many tasks did not succeed, in which way, and where to look. */
function failureLine(runId: string, c: Record<TaskState, number>): string {
  const parts: string[] = [];
  if (c.failed) parts.push(`${c.failed} failed`);
  if (c.rejected) parts.push(`${c.rejected} rejected by the API (not charged)`);
  if (c.in_doubt) parts.push(`${c.in_doubt} in doubt (resubmitted only with --retry-in-doubt)`);
  if (c.blocked) parts.push(`${c.blocked} blocked`);
  if (c.lost) parts.push(`${c.lost} paid but the result is lost`);
  const n = c.failed + c.rejected + c.in_doubt + c.blocked + c.lost;
  return `${n} task(s) did not succeed: ${parts.join(', ')}; \`mediabatch status ${runId}\` says why`;
}

function describeCounts(c: Record<TaskState, number>): string {
  const parts = [`${c.done} done`];
  if (c.failed) parts.push(`${c.failed} failed`);
  if (c.in_doubt) parts.push(`${c.in_doubt} in doubt`);
  if (c.rejected) parts.push(`${c.rejected} rejected`);
  if (c.blocked) parts.push(`${c.blocked} blocked`);
  if (c.lost) parts.push(`${c.lost} lost`);
  if (c.unfetched) parts.push(`${c.unfetched} unfetched`);
  if (c.stalled) parts.push(`${c.stalled} stalled`);
  const unfinished = UNFINISHED.reduce((n, s) => (s === 'unfetched' || s === 'stalled' ? n : n + c[s]), 0);
  if (unfinished) parts.push(`${unfinished} unfinished`);
  return parts.join(', ');
}

function displayPath(cwd: string, path: string): string {
  const rel = relative(cwd, path);
  return rel.startsWith('..') ? path : rel || '.';
}

/** Quota from configuration, or learned from the API's last code-101 answer, with what the ledger spent since. */
function quotaFigures(store: Store, config: Config, fingerprint: string, now: Date) {
  if (config.quota !== undefined) {
    const spent = store.ledgerSpent(fingerprint, periodOf(now)).net;
    return {
      limit: config.quota,
      used: spent,
      source: 'from configuration; used = this month in the local ledger',
    };
  }
  const learned = store.getQuota(fingerprint);
  if (learned && periodOf(learned.learnedAt) === periodOf(now)) {
    const since = store.ledgerSpentSince(fingerprint, learned.learnedAt).net;
    return {
      limit: learned.quota,
      used: learned.used + since,
      source: `learned from the API on ${learned.learnedAt.toISOString().slice(0, 10)}, plus the ledger since`,
    };
  }
  return undefined;
}
