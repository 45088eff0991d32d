// `mediabatch schedule`: cron expressions in a manifest's timezone fired as runs, one at a time.

export { checkPeriodBudget, type PeriodBudgetDecision, type PeriodBudgetInput } from './budget.js';
export { CronSchedule, type ParsedSchedule } from './next.js';
export { type DueDecision, type DueInput, dueFiring, resumePoint } from './policy.js';
export { sharedRunProblem } from './run-ids.js';
export {
  type Firing,
  type FiringOutcome,
  type FiringResult,
  type ManifestSchedule,
  Scheduler,
  type SchedulerDeps,
  type SchedulerOptions,
  type StopSummary,
  scheduleLeaseName,
} from './scheduler.js';
export { type ScheduledManifest, scheduledManifests } from './status.js';
export { realTimers, type Timers } from './timers.js';
export { formatInZone, offsetMinutes } from './zone.js';
