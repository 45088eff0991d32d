// How long a job waits and works. Pure: the random draws come in, the times go out.
import type { ExpectedSeconds } from '../catalog/durations.js';
import type { Random } from './random.js';

/** Share of a job's time spent queued (`pending`) before `processing`. */
const QUEUED_SHARE = 0.2;

export interface JobTiming {
  /** Epoch ms when the job turns `processing`. */
  processingAt: number;
  /** Epoch ms when the job ends `success` or `failed`. */
  endAt: number;
}

/** A job's total time (queue + work) is drawn evenly within the catalog's expected range for its request. */
export function planTiming(
  expected: ExpectedSeconds,
  createdAt: number,
  speed: number,
  random: Random,
): JobTiming {
  // Drawn even at speed 0, so that changing the speed never shifts the other random choices.
  const totalMs = random.between(expected.low, expected.high) * 1000 * speed;
  const queuedMs = Math.round(totalMs * QUEUED_SHARE);
  return { processingAt: createdAt + queuedMs, endAt: createdAt + Math.round(totalMs) };
}
