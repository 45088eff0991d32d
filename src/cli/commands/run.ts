// `mediabatch run <manifest>`: the API (or the embedded sandbox), the plan, the run's session; then
// ../run/drive.ts drives it. Flags become options here; the work is the library's.

import { resolve } from 'node:path';
import { type ApiClient, createApiClient } from '../../api/client.js';
import type { RunPlan } from '../../plan/build.js';
import { planForRun } from '../../plan/for-run.js';
import { resultsRunId, type Shard } from '../../plan/shard.js';
import type { RecordedInvocation } from '../../results/invocation.js';
import { refuseLocalOutputOfFleet, resolveOutput, sandboxOutput } from '../../results/output.js';
import { receiverOf } from '../../run/receiver.js';
import { selectTasks } from '../../run/select.js';
import { EMBEDDED_SANDBOX, openRunSession } from '../../run/session.js';
import { leaseTtlFromEnv, storeFirstFromEnv } from '../../run/settings.js';
import { EMBEDDED_SANDBOX_KEY, startEmbeddedSandbox } from '../../sandbox/embedded.js';
import { journalBeside, resetAccount } from '../../sandbox/journal.js';
import { sandboxVars } from '../../sandbox/media.js';
import { createStorage, joinKey } from '../../storage/index.js';
import { keyFingerprint, openStore } from '../../store/index.js';
import { sandboxJournalAnchor, stateLocation } from '../../store/location.js';
import { registerSecret } from '../../util/secrets.js';
import { abortOnInterrupt, sayOnEarlyInterrupt } from '../closing.js';
import { EXIT, ExitError } from '../errors.js';
import { displayPath } from '../format.js';
import { humanOut, type RunContext, type RunFlags } from '../run/context.js';
import { driveRun } from '../run/drive.js';
import { shardBudget, shardOfFlags } from '../shard.js';
import { viewDuringRun } from '../view.js';

export type { RunContext, RunFlags };

/** preflight, then submit, watch, download; resumes the run when it exists and is unfinished. */
export async function runCommand(file: string, flags: RunFlags, ctx: RunContext): Promise<number> {
  const { io, config } = ctx;
  // Until the run takes Ctrl-C itself (just before its first submission), one ends it here: loading,
  // planning, measuring media, the preflight, the question.
  sayOnEarlyInterrupt('nothing was submitted; run the same command again');
  // A bad --shard is said before anything starts (the embedded sandbox included).
  shardOfFlags(flags, io.env);
  if (flags.sandboxReset) {
    if (!flags.sandbox) throw new ExitError(EXIT.invalid, '--sandbox-reset: only with --sandbox');
    resetAccount(journalBeside(sandboxJournalAnchor(io.cwd, ctx.statePath)));
  }
  let baseUrl = config.baseUrl;
  let apiKey = config.apiKey;
  const sandbox = flags.sandbox
    ? await startEmbeddedSandbox(flags.sandboxSpeed ?? 0.1, sandboxJournalAnchor(io.cwd, ctx.statePath))
    : undefined;
  try {
    if (sandbox) {
      baseUrl = sandbox.baseUrl;
      apiKey = EMBEDDED_SANDBOX_KEY;
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
  const shard = shardOfFlags(flags, io.env);
  const plan = await planForRun(file, {
    cwd: io.cwd,
    now: io.now(),
    prices: config.prices,
    probe: flags.probe !== false,
    allowOutside: flags.allowOutsideData ?? false,
    ...(onSandbox ? { vars: sandboxVars(client.baseUrl) } : {}),
    ...(shard ? { shard } : {}),
  });
  const shown = (p: string) => displayPath(io.cwd, p);
  // `output: storage` is the account's bucket; a bucket output streams the results there.
  const tried = onSandbox ? sandboxOutput(plan.settings.output, config.storage, io.cwd) : undefined;
  if (tried?.line) humanOut(io, flags).write(`${tried.line}\n`);
  const output = resolveOutput(tried?.output ?? plan.settings.output, config.storage, io.env);
  plan.settings.output = output.output;
  refuseLocalOutputOfFleet(ctx.statePath, output, localOutputOf(flags, shown));
  const shardLine = applyBudget(plan, shard, flags.budget);
  const settings = plan.settings;
  const only = onlyOf(flags, plan.taskIds);
  const receiver = receiverOf(flags, settings, onSandbox);
  if (!receiver.ok) throw new ExitError(EXIT.invalid, receiver.message);
  const callbacks = receiver.receiver;
  const store = openStore(stateLocation(io.cwd, ctx.statePath), { now: io.now });
  const interrupt = abortOnInterrupt();
  try {
    const session = await openRunSession({
      store,
      plan,
      manifestPath: resolve(io.cwd, file),
      stateFile: stateLocation(io.cwd, ctx.statePath),
      // The embedded sandbox gets a new port at each start: its runs belong to "the embedded sandbox".
      api: { baseUrl: onSandbox ? EMBEDDED_SANDBOX : client.baseUrl, keyFingerprint: fingerprint },
      settingsToKeep: settingsToKeepOf(settings, flags, ctx),
      ...(flags.runId !== undefined ? { runId: flags.runId } : {}),
      ...(flags.newRun ? { newRun: true } : {}),
      ...(flags.acceptChanges ? { acceptChanges: true } : {}),
      ...(flags.retryFailed ? { retryFailed: true } : {}),
      ...(flags.retryInDoubt ? { retryInDoubt: true } : {}),
      wantsCallbackToken: callbacks !== undefined,
      shown,
      ...(shard ? { shard } : {}),
      ...storeFirstOf(flags, only, io.env),
      ...leaseTtlOf(io.env),
      signal: interrupt.signal,
    });
    const view = flags.view ? await viewDuringRun(ctx, session.runId, humanOut(io, flags)) : undefined;
    try {
      return await driveRun({
        file,
        flags,
        ctx,
        client,
        fingerprint,
        session,
        plan,
        onSandbox,
        only,
        callbacks,
        ...(shardLine ? { shardLine: shardLine.line } : {}),
        bucket: bucketOf(output, session.runId, io.env),
      });
    } finally {
      await view?.end();
      session.close();
    }
  } finally {
    interrupt.letGo();
    store.close();
  }
}

/** Whether a PostgreSQL state's run may write to a local folder, and the flag that says so. */
function localOutputOf(flags: RunFlags, shown: (p: string) => string) {
  return { allowed: flags.allowLocalOutput === true, allow: '--allow-local-output', shown };
}

/** The run's settings as its record keeps them, with the flags its printed commands carry again. */
function settingsToKeepOf(settings: RunPlan['settings'], flags: RunFlags, ctx: RunContext) {
  return {
    ...settings,
    concurrency: flags.concurrency ?? settings.concurrency,
    invocation: recordInvocation(flags, ctx),
  };
}

/** The flags a command printed later about this run must carry again (src/run/invocation.ts). */
function recordInvocation(flags: RunFlags, ctx: RunContext): RecordedInvocation {
  return {
    ...(flags.sandbox ? { sandbox: true } : {}),
    ...(ctx.configFile !== undefined ? { config: resolve(ctx.io.cwd, ctx.configFile) } : {}),
    ...(ctx.baseUrlFlag !== undefined && !flags.sandbox ? { baseUrl: ctx.baseUrlFlag } : {}),
    ...(flags.budget !== undefined ? { budget: flags.budget } : {}),
    ...(flags.allowOutsideData ? { allowOutsideData: true } : {}),
    ...(flags.allowLocalOutput ? { allowLocalOutput: true } : {}),
    ...(flags.allowPartial ? { allowPartial: true } : {}),
  };
}

/** The run's folder in the bucket, when its results go to one: shards share their run's prefix. */
function bucketOf(output: ReturnType<typeof resolveOutput>, runId: string, env: NodeJS.ProcessEnv) {
  if (!output.bucket) return undefined;
  return {
    storage: createStorage(output.bucket, { env }),
    runKey: joinKey(output.bucket.prefix, resultsRunId(runId)),
  };
}

/**
 * The budget the run works under, set in its plan's settings: --budget, or a shard's share of the
 * manifest's (its preflight line says so), or the manifest's.
 */
function applyBudget(plan: RunPlan, shard: Shard | undefined, budgetFlag: number | undefined) {
  const shardLine = shard ? shardBudget(shard, plan, budgetFlag) : undefined;
  const budget = shardLine ? shardLine.budget : (budgetFlag ?? plan.settings.budget);
  if (budget === undefined) delete plan.settings.budget;
  else plan.settings.budget = budget;
  return shardLine;
}

/** `--only`, resolved to task ids (undefined without it); `--run-id` checked on the way. */
function onlyOf(flags: RunFlags, taskIds: readonly string[]): string[] | undefined {
  const selection = flags.only === undefined ? undefined : selectTasks(flags.only, taskIds);
  if (selection && !selection.ok) throw new ExitError(EXIT.invalid, selection.message);
  if (flags.runId !== undefined && !/^[A-Za-z0-9_-]+$/.test(flags.runId)) {
    throw new ExitError(
      EXIT.invalid,
      `--run-id: must be letters, digits, - and _, got ${JSON.stringify(flags.runId)}`,
    );
  }
  return selection?.taskIds;
}

function leaseTtlOf(env: NodeJS.ProcessEnv): { leaseTtlMs?: number } {
  const ttl = leaseTtlFromEnv(env);
  return ttl === undefined ? {} : { leaseTtlMs: ttl };
}

/**
 * How many tasks a new run stores before it starts (the rest while it runs): every one for `--only` and
 * `--limit`, whose tasks are known only with all stored; MEDIABATCH_STORE_FIRST is a test-only setting.
 */
function storeFirstOf(flags: RunFlags, only: string[] | undefined, env: NodeJS.ProcessEnv) {
  if (only !== undefined || flags.limit !== undefined) return { storeFirst: Number.POSITIVE_INFINITY };
  const n = storeFirstFromEnv(env);
  return n === undefined ? {} : { storeFirst: n };
}
