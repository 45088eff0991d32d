// `status <run>`'s workers, as the view's workers panel shows them: how long ago each beat, said in
// minutes past a minute, and nothing in flight for a worker that is lost or has left, whatever its last
// heartbeat counted.
import { describe, expect, it } from 'vitest';
import { workerLines } from '../../src/cli/status-lines.js';
import type { WorkerRecord } from '../../src/store/index.js';

const NOW = new Date('2026-11-28T07:00:00Z');
const ago = (s: number) => new Date(NOW.getTime() - s * 1000);

function worker(id: string, beat: number, more: Partial<WorkerRecord> = {}): WorkerRecord {
  return {
    workerId: id,
    host: 'pod-a',
    pid: 7,
    startedAt: new Date('2026-11-28T06:00:00Z'),
    heartbeatAt: ago(beat),
    expiresAt: ago(beat - 60),
    inFlight: 8,
    submitted: 16,
    lost: false,
    ...more,
  };
}

describe("status's workers", () => {
  it('says each heartbeat as the view does, and a lost or gone worker holds nothing', () => {
    const lines = workerLines(
      [worker('w1', 4), worker('w2', 2030, { lost: true }), worker('w3', 7300, { stoppedAt: ago(7300) })],
      NOW,
    );
    expect(lines.join('\n').split('\n')).toEqual([
      'Workers: 1 working, 1 lost, 3 in all',
      'WORKER  HOST   SINCE                 IN FLIGHT  SENT  LAST HEARTBEAT   STATE',
      'w1      pod-a  2026-11-28 06:00 UTC  8          16    4 s ago          working',
      'w2      pod-a  2026-11-28 06:00 UTC  0          16    33 min 50 s ago  lost',
      'w3      pod-a  2026-11-28 06:00 UTC  0          16    2 h 1 min ago    left 2026-11-28 04:58 UTC',
    ]);
  });
});
