import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/store/db.js';
import { MIGRATIONS } from '../../src/store/index.js';
import { FakeClock, useTempDirs } from './helpers.js';

const temp = useTempDirs();

describe('migration 2 (new task states) on a database written by the first release', () => {
  it('keeps every run, task, attempt, file and ledger row, and the references between them', () => {
    const file = join(temp.dir(), 'mediabatch.db');
    const clock = new FakeClock();
    const old = openDatabase(file, clock.now, MIGRATIONS.slice(0, 1));
    const at = clock.now().toISOString();
    old.exec(`
      INSERT INTO runs (id, manifest_path, manifest_name, state, settings, created_at)
        VALUES ('r1', '/m.yaml', 'm', 'interrupted', '{}', '${at}');
      INSERT INTO tasks (run_id, task_id, seq, model, endpoint, body, body_hash, est_tokens, est_min, est_max,
        est_basis, est_assumed, state, img_uuid, cost, updated_at)
        VALUES ('r1', 'a', 0, 'flat-image', '/api/v1/images/generations', '{}', 'h', 0.2, 0.2, 0.2, 'flat', 0,
          'done', 'uuid-a', 0.2, '${at}'),
               ('r1', 'b', 1, 'flat-image', '/api/v1/images/generations', '{}', 'h', 0.2, 0.2, 0.2, 'flat', 0,
          'running', 'uuid-b', 0.2, '${at}');
      INSERT INTO attempts (run_id, task_id, attempt_no, sent_at, outcome, img_uuid)
        VALUES ('r1', 'a', 1, '${at}', 'submitted', 'uuid-a');
      INSERT INTO files (run_id, task_id, idx, kind, path, bytes, sha256, completed_at)
        VALUES ('r1', 'a', 1, 'image', '/o/a/1.png', 10, 'x', '${at}');
      INSERT INTO ledger (key_fingerprint, period, run_id, task_id, img_uuid, kind, tokens, at)
        VALUES ('k', '2026-11', 'r1', 'a', 'uuid-a', 'charge', 0.2, '${at}');
    `);
    old.close();

    const store = temp.open(file, { now: clock.now });
    expect(store.tasks.tasksOfRun('r1').map((t) => [t.taskId, t.state, t.imgUuid, t.retries])).toEqual([
      ['a', 'done', 'uuid-a', 0],
      ['b', 'running', 'uuid-b', 0],
    ]);
    expect(store.submissions.attemptsOf('r1', 'a')).toHaveLength(1);
    expect(store.files.filesOfTask('r1', 'a')).toHaveLength(1);
    expect(store.ledger.runSpent('r1')).toEqual({ charged: 0.2, refunded: 0, net: 0.2 });
    // The new states are accepted, and the references still hold.
    store.tasks.moveTask('r1', 'b', 'stalled', 'past its deadline');
    expect(store.tasks.getTask('r1', 'b')?.state).toBe('stalled');
    // Switched off only around the rebuild: the connection keeps enforcing references afterwards.
    expect(store.pragmas().foreignKeys).toBe(1);
    store.close();
    const check = new Database(file, { readonly: true });
    try {
      expect(check.prepare('PRAGMA foreign_key_check').all()).toEqual([]);
    } finally {
      check.close();
    }
  });
});
