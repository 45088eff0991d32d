// The runner's group commit (src/run/writes.ts) keeps one batch committing at a time: the writes asked
// for while a COMMIT is unanswered go together in the next batch, fewer and larger commits. The store here is a stand-in whose commits are answered when the test says, so the order of
// batches is exact; the real stores' batches are held to their outcomes in test/store/batch.test.ts and
// test/postgres/pipeline.test.ts.
import { describe, expect, it } from 'vitest';
import { WriteQueue } from '../../src/run/writes.js';
import type { Store } from '../../src/store/index.js';

type BatchResult = Awaited<ReturnType<Store['batchLater']>>[number];

/** A store whose batchLater runs the writes at once and answers each commit when `answer()` is called. */
function storeAnsweredByHand() {
  const batches: string[][] = [];
  const unanswered: Array<() => void> = [];
  let inFlight = 0;
  let mostInFlight = 0;
  const store = {
    batchLater(writes: readonly (() => unknown)[]): Promise<BatchResult[]> {
      const results: BatchResult[] = writes.map((write) => {
        try {
          return { ok: true, value: write() };
        } catch (error) {
          return { ok: false, error };
        }
      });
      batches.push(results.map((r) => (r.ok ? String(r.value) : 'refused')));
      inFlight += 1;
      mostInFlight = Math.max(mostInFlight, inFlight);
      return new Promise((resolve) =>
        unanswered.push(() => {
          inFlight -= 1;
          resolve(results);
        }),
      );
    },
  } as unknown as Store;
  return {
    store,
    batches,
    mostInFlight: () => mostInFlight,
    answer: () => unanswered.shift()?.(),
  };
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('the group commit', () => {
  it('begins no batch while one is committing; the writes asked for meanwhile go together in the next', async () => {
    const s = storeAnsweredByHand();
    const queue = new WriteQueue(s.store);
    const resumed: string[] = [];
    const a = queue.write(() => 'a').then((v) => resumed.push(v));
    await turn();
    expect(s.batches).toEqual([['a']]);

    const b = queue.write(() => 'b').then((v) => resumed.push(v));
    await turn();
    const c = queue.write(() => 'c').then((v) => resumed.push(v));
    await turn();
    // a's COMMIT is not answered: b and c wait for it, and nobody resumed before its own commit.
    expect(s.batches).toEqual([['a']]);
    expect(resumed).toEqual([]);

    s.answer();
    await a;
    expect(resumed).toEqual(['a']);
    await turn();
    expect(s.batches).toEqual([['a'], ['b', 'c']]);
    expect(resumed).toEqual(['a']);

    s.answer();
    await Promise.all([b, c]);
    expect(resumed).toEqual(['a', 'b', 'c']);
    expect(s.mostInFlight()).toBe(1);
  });

  it("sends a batch's money writes after its other writes, and gives each caller its own answer", async () => {
    const s = storeAnsweredByHand();
    const queue = new WriteQueue(s.store);
    const asked = [
      queue.write(() => 'intent-1', { money: true }),
      queue.write(() => 'poll-1'),
      queue.write(() => 'charge-2', { money: true }),
      queue.write(() => 'done-3'),
    ];
    await turn();
    // On PostgreSQL the first money write takes the run's money lock until the commit: last, it is held
    // for the money writes alone. Each kind keeps its order.
    expect(s.batches).toEqual([['poll-1', 'done-3', 'intent-1', 'charge-2']]);
    s.answer();
    expect(await Promise.all(asked)).toEqual(['intent-1', 'poll-1', 'charge-2', 'done-3']);
  });

  it('a refused write and a failed commit reach their callers, and the next batch still goes', async () => {
    const s = storeAnsweredByHand();
    const queue = new WriteQueue(s.store);
    const refused = queue.write(() => {
      throw new Error('refused by the store');
    });
    const kept = queue.write(() => 'kept');
    await turn();
    s.answer();
    await expect(refused).rejects.toThrow('refused by the store');
    await expect(kept).resolves.toBe('kept');

    // A commit that fails rejects its batch's callers, and does not hold up the batches after it.
    const after = queue.write(() => 'after');
    let calls = 0;
    const failsOnce = {
      batchLater: (writes: readonly (() => unknown)[]) =>
        ++calls === 1
          ? Promise.reject(new Error('the disk is full'))
          : Promise.resolve(writes.map((w) => ({ ok: true, value: w() }))),
    } as unknown as Store;
    const broken = new WriteQueue(failsOnce);
    const lost = expect(broken.write(() => 'lost')).rejects.toThrow('the disk is full');
    await turn();
    const next = broken.write(() => 'next');
    await lost;
    await expect(next).resolves.toBe('next');
    s.answer();
    await expect(after).resolves.toBe('after');
    expect(s.batches).toEqual([['refused', 'kept'], ['after']]);
  });
});
