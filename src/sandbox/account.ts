// The money of the sandbox account: an exact balance (fractional tokens) and the API key's monthly
// quota. Every charge and refund goes through here, so /_sandbox/state can account for every token.
import { roundTokens } from '../util/money.js';

export type Refusal = { code: 100; msg: string } | { code: 101; msg: string };

export interface QuotaState {
  limit: number | null;
  used: number;
  period: 'monthly';
  /** The calendar month (UTC) `used` counts, e.g. `2024-10`. */
  month: string;
}

export function monthOf(epochMs: number): string {
  return new Date(epochMs).toISOString().slice(0, 7);
}

/** One change of the account's money, as the embedded sandbox's journal keeps it (src/sandbox/journal.ts). */
export type AccountMove =
  | { kind: 'charge'; cost: number; month: string }
  | { kind: 'refund'; cost: number; month: string }
  | { kind: 'set'; balance: number };

export class Account {
  #balance: number;
  #quota: number | null;
  readonly #usedByMonth = new Map<string, number>();
  /** Told of every move once it is made (the journal of the embedded sandbox). */
  onMove: ((move: AccountMove) => void) | undefined;

  constructor(balance: number, quota: number | null) {
    this.#balance = roundTokens(balance);
    this.#quota = quota;
  }

  get balance(): number {
    return this.#balance;
  }

  set balance(tokens: number) {
    this.#balance = roundTokens(tokens);
    this.onMove?.({ kind: 'set', balance: this.#balance });
  }

  /** Makes the moves of an earlier process again, in order, without telling onMove (they are kept already). */
  replay(moves: Iterable<AccountMove>): void {
    for (const move of moves) {
      if (move.kind === 'set') this.#balance = roundTokens(move.balance);
      else if (move.kind === 'charge') this.#charged(move.cost, move.month);
      else this.#refunded(move.cost, move.month);
    }
  }

  set quota(limit: number | null) {
    this.#quota = limit;
  }

  quotaState(nowMs: number): QuotaState {
    const month = monthOf(nowMs);
    return { limit: this.#quota, used: this.#usedByMonth.get(month) ?? 0, period: 'monthly', month };
  }

  /** Why `cost` cannot be charged now, or null when it can. Balance is checked before quota, as the service does. */
  refusal(cost: number, nowMs: number): Refusal | null {
    if (cost > this.#balance) return { code: 100, msg: 'tokens is not enough' };
    const { limit, used } = this.quotaState(nowMs);
    if (limit !== null && roundTokens(used + cost) > limit) {
      return { code: 101, msg: `API key quota exceeded: ${used} of ${limit} tokens used (monthly)` };
    }
    return null;
  }

  /** Deducts `cost`; returns the month it counts against, so a refund gives quota back to the same month. */
  charge(cost: number, nowMs: number): string {
    const month = monthOf(nowMs);
    this.#charged(cost, month);
    this.onMove?.({ kind: 'charge', cost, month });
    return month;
  }

  refund(cost: number, month: string): void {
    this.#refunded(cost, month);
    this.onMove?.({ kind: 'refund', cost, month });
  }

  #charged(cost: number, month: string): void {
    this.#balance = roundTokens(this.#balance - cost);
    this.#usedByMonth.set(month, roundTokens((this.#usedByMonth.get(month) ?? 0) + cost));
  }

  #refunded(cost: number, month: string): void {
    this.#balance = roundTokens(this.#balance + cost);
    const used = this.#usedByMonth.get(month) ?? 0;
    this.#usedByMonth.set(month, roundTokens(Math.max(0, used - cost)));
  }
}
