// What a process asks of libpq, for the benches and the tests that count round trips: each method of the
// binding wrapped once on its prototype, before any connection is opened (the store's watchdog wraps a
// connection's methods as it finds them on the prototype).
import { createRequire } from 'node:module';

/** The calls that wait for the server: each one round trip (a pipeline's Sync or flush request included). */
const WAITING = ['exec', 'execPrepared', 'prepare', 'pipelineSync', 'sendFlushRequest'] as const;
/** The calls that send a statement into a pipeline, without a wait of their own. */
const PIPELINED = ['sendPrepare', 'sendQueryPrepared', 'sendQueryParams'] as const;

export type LibpqCall = (typeof WAITING)[number] | (typeof PIPELINED)[number];

/** Whether `method` waits for the server (one round trip). */
export function waits(method: LibpqCall): boolean {
  return (WAITING as readonly string[]).includes(method);
}

/** Calls `listener` before each call of this process into libpq that sends something to the server. */
export function onLibpqCalls(listener: (method: LibpqCall, args: readonly unknown[]) => void): void {
  const Libpq = createRequire(import.meta.url)('libpq') as { prototype: Record<string, unknown> };
  for (const method of [...WAITING, ...PIPELINED]) {
    const call = Libpq.prototype[method] as (...args: unknown[]) => unknown;
    Libpq.prototype[method] = function (this: unknown, ...args: unknown[]) {
      listener(method, args);
      return call.apply(this, args);
    };
  }
}
