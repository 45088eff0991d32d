// What the user sees while a run goes: a live line on a terminal, plain lines otherwise.

import cliProgress from 'cli-progress';
import type { RunProgress } from '../run/runner.js';
import type { TaskState } from '../store/index.js';
import { tokensPlainText as fmt, roundTokens } from '../util/money.js';
import type { Out } from './io.js';

export function describeProgress(p: RunProgress, total: number, estimate: number): string {
  const c = p.counts;
  const finished = finishedCount(c);
  const parts = [`${finished}/${total} finished`, `${c.done} done`];
  if (c.failed) parts.push(`${c.failed} failed`);
  if (c.in_doubt) parts.push(`${c.in_doubt} in doubt`);
  if (c.rejected) parts.push(`${c.rejected} rejected`);
  const running = c.submitting + c.submitted + c.running + c.downloading;
  if (running) parts.push(`${running} in flight`);
  if (c.awaiting_review) parts.push(`${c.awaiting_review} awaiting review`);
  parts.push(
    `${fmt(p.charged - p.refunded)} of ~${fmt(roundTokens(estimate + (p.estimateChange ?? 0)))} tokens`,
  );
  return parts.join(' · ');
}

export function finishedCount(counts: Record<TaskState, number>): number {
  return counts.done + counts.failed + counts.rejected + counts.in_doubt + counts.blocked;
}

/** Renders progress: a live bar with an ETA on a terminal (cli-progress), otherwise a line every 10 %. */
export class ProgressView {
  readonly #out: Out;
  readonly #total: number;
  readonly #estimate: number;
  readonly #bar: cliProgress.SingleBar | undefined;
  #lastDecile = -1;
  #lastLine = '';

  constructor(opts: { out: Out; interactive: boolean; total: number; estimate: number; now?: () => number }) {
    this.#now = opts.now ?? Date.now;
    this.#startedAt = this.#now();
    this.#out = opts.out;
    this.#total = opts.total;
    this.#estimate = opts.estimate;
    if (opts.interactive) {
      this.#bar = new cliProgress.SingleBar(
        {
          // Our own ETA: cli-progress prints "NF" until the first task finishes.
          format: '[{bar}] {summary}{etaText}',
          // A terminal is a real stream; cli-progress needs its cursor functions.
          stream: opts.out as NodeJS.WriteStream,
          hideCursor: true,
          etaBuffer: 50,
          fps: 5,
        },
        cliProgress.Presets.legacy,
      );
      this.#bar.start(opts.total, 0, { summary: 'starting', etaText: '' });
    }
  }

  update(p: RunProgress): void {
    const finished = finishedCount(p.counts);
    const line = describeProgress(p, this.#total, this.#estimate);
    if (this.#bar) {
      this.#bar.update(finished, { summary: line, etaText: this.#eta(finished) });
      return;
    }
    const decile = this.#total === 0 ? 10 : Math.floor((finished / this.#total) * 10);
    if (decile !== this.#lastDecile && line !== this.#lastLine) {
      this.#lastDecile = decile;
      this.#lastLine = line;
      this.#out.write(`${line}\n`);
    }
  }

  readonly #now: () => number;
  readonly #startedAt: number;
  #firstFinished: number | undefined;

  /** From the pace since the view started (a resumed run's earlier tasks do not count). */
  #eta(finished: number): string {
    this.#firstFinished ??= finished;
    return etaText(this.#now() - this.#startedAt, finished - this.#firstFinished, this.#total - finished);
  }

  close(): void {
    this.#bar?.stop();
  }
}

/** ` · ETA 1m05s` from the time spent on the tasks finished so far; empty until one has finished. */
export function etaText(elapsedMs: number, finishedSinceStart: number, left: number): string {
  if (finishedSinceStart <= 0 || left <= 0) return '';
  const seconds = Math.round(((elapsedMs / finishedSinceStart) * left) / 1000);
  return seconds < 60
    ? ` · ETA ${seconds}s`
    : ` · ETA ${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`;
}
