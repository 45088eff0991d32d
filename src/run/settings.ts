// Run policy: every number that shapes how a run behaves, typed, documented and defaulted in one place.
// The CLI and the scheduler pass the few a user can set; the rest are the library's.

import { DEFAULT_POLL_PROFILES, fallbackProfiles, type PollProfiles, scaleProfiles } from './polling.js';
import { DEFAULT_WATCH_POLICY, RUNNER_POLICY_KEYS, type RunnerPolicy, type WatchPolicy } from './runner.js';

/** The Runner's own numbers (RunnerPolicy: polls, downloads, submission retries) and the session's. */
export interface RunPolicy extends RunnerPolicy {
  /** A run's lease lasts this long without renewal; it is renewed every quarter of it. */
  leaseTtlMs: number;
  /** With a callback receiver, jobs are still polled this often, for callbacks that never came. */
  callbackFallbackPollMs: number;
  pollProfiles: PollProfiles;
  /** Multiplies the catalog's expected job durations: the time scale of the sandbox demo and the tests. */
  jobTimeScale: number;
  watch: WatchPolicy;
}

export const DEFAULT_RUN_POLICY: RunPolicy = {
  leaseTtlMs: 60_000,
  pollConcurrency: 16,
  maxDownloadBytes: 2 * 1024 ** 3,
  downloadTimeoutMs: 60_000,
  submitRetries: 5,
  retryBaseMs: 500,
  retryCapMs: 30_000,
  giveUpAfterTasks: 3,
  callbackFallbackPollMs: 60_000,
  pollProfiles: DEFAULT_POLL_PROFILES,
  jobTimeScale: 1,
  watch: DEFAULT_WATCH_POLICY,
};

/**
 * Every wait scaled by `scale` (the sandbox demo runs at a tenth of real timing; tests at a hundredth).
 * Callbacks travel over the network whatever the scale, so their wait keeps a floor of two seconds.
 */
export function scaledRunPolicy(scale: number, base: RunPolicy = DEFAULT_RUN_POLICY): RunPolicy {
  if (scale === 1) return base;
  const w = base.watch;
  return {
    ...base,
    retryBaseMs: base.retryBaseMs * scale,
    retryCapMs: base.retryCapMs * scale,
    callbackFallbackPollMs: base.callbackFallbackPollMs * scale,
    pollProfiles: scaleProfiles(base.pollProfiles, scale),
    jobTimeScale: base.jobTimeScale * scale,
    watch: {
      ...w,
      jobDeadlineMs: {
        image: w.jobDeadlineMs.image * scale,
        audio: w.jobDeadlineMs.audio * scale,
        video: w.jobDeadlineMs.video * scale,
      },
      stalledPollMs: w.stalledPollMs * scale,
      notFoundWindowMs: w.notFoundWindowMs * scale,
      successGraceMs: w.successGraceMs * scale,
      doubtCallbackWaitMs: Math.max(2_000, w.doubtCallbackWaitMs * scale),
    },
  };
}

/** The part of `policy` the Runner takes as it is. */
export function runnerPolicyOf(policy: RunPolicy): RunnerPolicy {
  const out = {} as RunnerPolicy;
  for (const key of RUNNER_POLICY_KEYS) out[key] = policy[key];
  return out;
}

/** Poll profiles for a run with a callback receiver: polling becomes a slow safety net. */
export function withCallbacks(policy: RunPolicy): PollProfiles {
  return fallbackProfiles(policy.pollProfiles, policy.callbackFallbackPollMs);
}

/** Downloads keep pace with what is in flight (each costs two fsyncs), within bounds. */
export function downloadConcurrencyFor(concurrency: number): number {
  return Math.max(4, Math.min(concurrency, 32));
}

/**
 * MEDIABATCH_POLL_SCALE, for tests only (undocumented for users): multiplies every poll and retry delay
 * so that tests driving the CLI as a child process do not wait real seconds.
 */
export function pollScaleFromEnv(env: NodeJS.ProcessEnv): number | undefined {
  const n = Number(env['MEDIABATCH_POLL_SCALE'] ?? '');
  return env['MEDIABATCH_POLL_SCALE'] && Number.isFinite(n) && n > 0 ? n : undefined;
}

/** MEDIABATCH_STORE_FIRST, for tests only: how many tasks a new run stores before it starts. */
export function storeFirstFromEnv(env: NodeJS.ProcessEnv): number | undefined {
  const n = Number(env['MEDIABATCH_STORE_FIRST'] ?? '');
  return Number.isInteger(n) && n > 0 ? n : undefined;
}

/**
 * MEDIABATCH_LEASE_TTL_MS, for tests only: how long a run's lease, and a fleet worker's row, live past
 * their last renewal (chaos tests find a silent worker lost in seconds, not a minute).
 */
export function leaseTtlFromEnv(env: NodeJS.ProcessEnv): number | undefined {
  const n = Number(env['MEDIABATCH_LEASE_TTL_MS'] ?? '');
  return Number.isInteger(n) && n > 0 ? n : undefined;
}
