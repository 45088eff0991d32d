// How long a job waits and works, by kind. Pure: the random draws come in, the times go out.
import type { CatalogEntry } from '../catalog/types.js';
import type { Random } from './random.js';

/** Realistic total durations in seconds (queue + work) at speed 1. */
export const JOB_SECONDS: Record<CatalogEntry['kind'], { min: number; max: number }> = {
  image: { min: 3, max: 8 },
  audio: { min: 5, max: 15 },
  video: { min: 30, max: 90 },
};

/** Share of a job's time spent queued (`pending`) before `processing`. */
const QUEUED_SHARE = 0.2;

export interface JobTiming {
  /** Epoch ms when the job turns `processing`. */
  processingAt: number;
  /** Epoch ms when the job ends `success` or `failed`. */
  endAt: number;
}

export function planTiming(
  kind: CatalogEntry['kind'],
  createdAt: number,
  speed: number,
  random: Random,
): JobTiming {
  const { min, max } = JOB_SECONDS[kind];
  // Drawn even at speed 0, so that changing the speed never shifts the other random choices.
  const totalMs = random.between(min, max) * 1000 * speed;
  const queuedMs = Math.round(totalMs * QUEUED_SHARE);
  return { processingAt: createdAt + queuedMs, endAt: createdAt + Math.round(totalMs) };
}
