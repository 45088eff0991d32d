// What the user sees while a run goes: a live line on a terminal, plain lines otherwise.

import cliProgress from 'cli-progress';
import type { RunAccount } from '../account/index.js';
import type { RunProgress } from '../run/runner.js';
import { TASK_STATES, type TaskState, UNFINISHED } from '../store/index.js';
import { tokensText as fmt, roundTokens } from '../util/money.js';
import { countOf, fmtCount, fmtTokensWithUnit } from '../util/numbers.js';
import type { Out } from './io.js';

/** What a progress line shows: the counts by shown state, the net spent and the estimate. */
export interface ProgressFigures {
  byState: Record<TaskState, number>;
  tasks: number;
  net: number;
  estimate: number;
}

/** `12/30 finished · 10 done · 2 failed · 3 in flight · 1,604 of ~3,000 tokens`, from live counts or the account. */
export function progressLine(f: ProgressFigures): string {
  const c = f.byState;
  const parts = [`${fmtCount(finishedCount(c))}/${fmtCount(f.tasks)} finished`, `${fmtCount(c.done)} done`];
  const named: Array<[TaskState, string]> = [
    ['failed', 'failed'],
    ['in_doubt', 'in doubt'],
    ['rejected', 'rejected'],
    ['skipped', 'skipped'],
  ];
  for (const [state, label] of named) if (c[state]) parts.push(`${fmtCount(c[state])} ${label}`);
  const running = c.submitting + c.submitted + c.running + c.downloading;
  if (running) parts.push(`${fmtCount(running)} in flight`);
  if (c.awaiting_review) parts.push(`${fmtCount(c.awaiting_review)} awaiting review`);
  parts.push(`${fmt(roundTokens(f.net))} of ~${fmtTokensWithUnit(roundTokens(f.estimate))}`);
  return parts.join(' · ');
}

export function describeProgress(p: RunProgress, total: number, estimate: number): string {
  return progressLine({
    byState: p.counts,
    tasks: total,
    net: p.charged - p.refunded,
    estimate: estimate + (p.estimateChange ?? 0),
  });
}

/** The last frame: the run's account, so the line ends on what `status` and the report say. */
export function accountProgressLine(account: RunAccount): string {
  return progressLine({
    byState: account.by_state,
    tasks: account.tasks,
    net: account.money.net,
    estimate: account.estimate.tokens,
  });
}

/** While only people can move the run on: what it waits for and the command that decides; no ETA. */
export function waitingLine(decisions: number, reviewCommand: string): string {
  return `waiting for ${countOf(decisions, 'decision')} — ${reviewCommand}`;
}

/** Tasks at an end, as the account counts them: every task a later run has nothing left to do for. */
export function finishedCount(counts: Record<TaskState, number>): number {
  return TASK_STATES.reduce((n, s) => n + counts[s], 0) - UNFINISHED.reduce((n, s) => n + counts[s], 0);
}

/** Renders progress: a live bar with an ETA on a terminal (cli-progress), otherwise a line every 10 %. */
export class ProgressView {
  readonly #out: Out;
  readonly #total: number;
  readonly #estimate: number;
  readonly #bar: cliProgress.SingleBar | undefined;
  #lastDecile = -1;
  #lastLine = '';

  readonly #reviewCommand: string;
  readonly #account: (() => RunAccount) | undefined;
  /** When the account may be read again for a frame (performance.now(), not the injected clock). */
  #accountDueAt = 0;

  constructor(opts: {
    out: Out;
    interactive: boolean;
    total: number;
    estimate: number;
    now?: () => number;
    /** The command that decides on results awaiting review, for the `--wait-for-review` line. */
    reviewCommand?: string;
    /**
     * The run's account, read for each frame: the line then states what `status` and the report state
     * at that moment, never the runner's own counters.
     */
    account?: () => RunAccount;
  }) {
    this.#account = opts.account;
    this.#reviewCommand = opts.reviewCommand ?? 'mediabatch review';
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
    const waiting = p.waitingForDecisions ?? 0;
    // Nothing moves without a person: no ETA, and the time spent waiting is not pace.
    if (waiting > 0) {
      this.#frame(finished, waitingLine(waiting, this.#reviewCommand), '');
      this.#firstFinished = undefined;
      this.#startedAt = this.#now();
      return;
    }
    if (this.#account !== undefined) {
      const started = performance.now();
      if (started < this.#accountDueAt) return;
      const account = this.#account();
      // At most a tenth of the run's time goes to the line: at a million tasks a read takes tens of ms.
      this.#accountDueAt = started + 10 * (performance.now() - started);
      this.#frame(
        account.finished,
        accountProgressLine(account),
        this.#bar ? this.#eta(account.finished) : '',
      );
      return;
    }
    const line = describeProgress(p, this.#total, this.#estimate);
    this.#frame(finished, line, this.#bar ? this.#eta(finished) : '');
  }

  /** The last frame, from the run's account: what `status` and the report say too. */
  finish(account: RunAccount): void {
    this.#frame(account.finished, accountProgressLine(account), '', true);
  }

  #frame(finished: number, line: string, etaText: string, last = false): void {
    if (this.#bar) {
      this.#bar.update(finished, { summary: line, etaText });
      return;
    }
    const decile = this.#total === 0 ? 10 : Math.floor((finished / this.#total) * 10);
    const waiting = line.startsWith('waiting for ');
    if ((decile !== this.#lastDecile || waiting || last) && line !== this.#lastLine) {
      this.#lastDecile = decile;
      this.#lastLine = line;
      this.#out.write(`${line}\n`);
    }
  }

  readonly #now: () => number;
  #startedAt: number;
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
