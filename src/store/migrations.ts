// Numbered schema migrations. APPEND ONLY: a released migration is never edited, reordered or removed,
// because databases in the field have already run it. Change the schema by adding a new entry.
// Each entry runs in its own transaction together with its row in `migrations`.

export interface Migration {
  /** 1, 2, 3, … in order, no gaps; PostgreSQL's list may leave out one only SQLite needs, and add one it alone needs (its last id is the schema). */
  id: number;
  name: string;
  sql: string;
  /**
   * Rebuilds a table that others reference (SQLite cannot alter a CHECK): foreign keys are switched off
   * around the transaction, as SQLite's own procedure requires, and checked before it commits.
   */
  rebuildsTables?: boolean;
}

/**
 * Numbers PostgreSQL's list took for changes of its own (src/store/pg/migrations.ts; 22 it left out): taken
 * here too, as 17 is, so that a schema number means the same tables on either backend.
 */
function takenOnPostgres(ids: readonly number[]): Migration[] {
  return ids.map((id) => ({ id, name: "PostgreSQL's alone (src/store/pg/migrations.ts)", sql: 'SELECT 1;' }));
}

export const MIGRATIONS: readonly Migration[] = [
  {
    id: 1,
    name: 'runs, tasks, attempts, job events, files, ledger, quota, leases, schedules',
    sql: `
CREATE TABLE runs (
  id             TEXT PRIMARY KEY,
  manifest_path  TEXT NOT NULL,
  manifest_name  TEXT NOT NULL,
  state          TEXT NOT NULL CHECK (state IN ('running', 'interrupted', 'finished', 'refused')),
  exit_code      INTEGER,
  settings       TEXT NOT NULL CHECK (json_valid(settings)),
  callback_token TEXT,
  balance_before REAL,
  balance_after  REAL,
  created_at     TEXT NOT NULL,
  started_at     TEXT,
  finished_at    TEXT
) STRICT;
CREATE INDEX runs_by_manifest ON runs (manifest_path, created_at);

CREATE TABLE tasks (
  run_id         TEXT NOT NULL REFERENCES runs (id),
  task_id        TEXT NOT NULL,
  seq            INTEGER NOT NULL,
  model          TEXT NOT NULL,
  endpoint       TEXT NOT NULL,
  body           TEXT NOT NULL,
  body_hash      TEXT NOT NULL,
  est_tokens     REAL NOT NULL,
  est_min        REAL NOT NULL,
  est_max        REAL NOT NULL,
  est_basis      TEXT NOT NULL,
  est_assumed    INTEGER NOT NULL CHECK (est_assumed IN (0, 1)),
  state          TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'submitting', 'in_doubt',
                   'submitted', 'running', 'downloading', 'done', 'failed', 'rejected', 'blocked')),
  img_uuid       TEXT,
  cost           REAL,
  refunded       REAL,
  error          TEXT,
  submitted_at   TEXT,
  finished_at    TEXT,
  job_status     TEXT,
  job_duration   REAL,
  last_polled_at TEXT,
  next_poll_at   TEXT,
  poll_count     INTEGER NOT NULL DEFAULT 0,
  source         TEXT CHECK (source IN ('poll', 'callback')),
  updated_at     TEXT NOT NULL,
  PRIMARY KEY (run_id, task_id)
) STRICT;
CREATE UNIQUE INDEX tasks_by_img_uuid ON tasks (img_uuid) WHERE img_uuid IS NOT NULL;
CREATE INDEX tasks_by_state ON tasks (run_id, state, seq);
CREATE INDEX tasks_due_for_poll ON tasks (run_id, next_poll_at) WHERE state IN ('submitted', 'running');

CREATE TABLE attempts (
  run_id      TEXT NOT NULL,
  task_id     TEXT NOT NULL,
  attempt_no  INTEGER NOT NULL CHECK (attempt_no >= 1),
  sent_at     TEXT NOT NULL,
  answered_at TEXT,
  outcome     TEXT CHECK (outcome IN ('submitted', 'rejected', 'not_charged', 'in_doubt')),
  http_status INTEGER,
  code        INTEGER,
  message     TEXT,
  img_uuid    TEXT,
  PRIMARY KEY (run_id, task_id, attempt_no),
  FOREIGN KEY (run_id, task_id) REFERENCES tasks (run_id, task_id)
) STRICT;

CREATE TABLE job_events (
  img_uuid TEXT NOT NULL,
  status   TEXT NOT NULL,
  at       TEXT NOT NULL,
  source   TEXT NOT NULL CHECK (source IN ('poll', 'callback')),
  record   TEXT CHECK (record IS NULL OR json_valid(record)),
  PRIMARY KEY (img_uuid, status)
) STRICT;

CREATE TABLE files (
  run_id       TEXT NOT NULL,
  task_id      TEXT NOT NULL,
  idx          INTEGER NOT NULL CHECK (idx >= 0),
  kind         TEXT NOT NULL CHECK (kind IN ('image', 'audio', 'video', 'json')),
  path         TEXT NOT NULL,
  bytes        INTEGER NOT NULL CHECK (bytes >= 0),
  sha256       TEXT NOT NULL,
  source_host  TEXT,
  completed_at TEXT NOT NULL,
  PRIMARY KEY (run_id, task_id, idx),
  FOREIGN KEY (run_id, task_id) REFERENCES tasks (run_id, task_id)
) STRICT;

CREATE TABLE ledger (
  id              INTEGER PRIMARY KEY,
  key_fingerprint TEXT NOT NULL,
  period          TEXT NOT NULL CHECK (period GLOB '[0-9][0-9][0-9][0-9]-[0-1][0-9]'),
  run_id          TEXT NOT NULL REFERENCES runs (id),
  task_id         TEXT NOT NULL,
  img_uuid        TEXT NOT NULL,
  kind            TEXT NOT NULL CHECK (kind IN ('charge', 'refund')),
  tokens          REAL NOT NULL CHECK (tokens >= 0),
  at              TEXT NOT NULL,
  UNIQUE (img_uuid, kind)
) STRICT;
CREATE INDEX ledger_by_key_period ON ledger (key_fingerprint, period);
CREATE INDEX ledger_by_run ON ledger (run_id, task_id);

CREATE TABLE quota (
  key_fingerprint TEXT PRIMARY KEY,
  used            REAL NOT NULL,
  quota           REAL NOT NULL,
  period          TEXT NOT NULL,
  learned_at      TEXT NOT NULL
) STRICT;

CREATE TABLE leases (
  name         TEXT PRIMARY KEY,
  holder       TEXT NOT NULL,
  acquired_at  TEXT NOT NULL,
  heartbeat_at TEXT NOT NULL,
  expires_at   TEXT NOT NULL
) STRICT;

CREATE TABLE schedules (
  manifest_path TEXT PRIMARY KEY,
  last_fired_at TEXT,
  last_run_id   TEXT,
  next_fire_at  TEXT,
  updated_at    TEXT NOT NULL
) STRICT;
`,
  },
  {
    id: 2,
    name: 'task states stalled, unfetched and lost; automatic retries; unknown costs; recovery from doubt',
    rebuildsTables: true,
    sql: `
CREATE TABLE tasks_v2 (
  run_id         TEXT NOT NULL REFERENCES runs (id),
  task_id        TEXT NOT NULL,
  seq            INTEGER NOT NULL,
  model          TEXT NOT NULL,
  endpoint       TEXT NOT NULL,
  body           TEXT NOT NULL,
  body_hash      TEXT NOT NULL,
  est_tokens     REAL NOT NULL,
  est_min        REAL NOT NULL,
  est_max        REAL NOT NULL,
  est_basis      TEXT NOT NULL,
  est_assumed    INTEGER NOT NULL CHECK (est_assumed IN (0, 1)),
  state          TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'submitting', 'in_doubt',
                   'submitted', 'running', 'stalled', 'downloading', 'unfetched', 'done', 'failed',
                   'rejected', 'blocked', 'lost')),
  img_uuid       TEXT,
  cost           REAL,
  refunded       REAL,
  error          TEXT,
  submitted_at   TEXT,
  finished_at    TEXT,
  job_status     TEXT,
  job_duration   REAL,
  last_polled_at TEXT,
  next_poll_at   TEXT,
  poll_count     INTEGER NOT NULL DEFAULT 0,
  source         TEXT CHECK (source IN ('poll', 'callback')),
  updated_at     TEXT NOT NULL,
  retries        INTEGER NOT NULL DEFAULT 0 CHECK (retries >= 0),
  cost_assumed   INTEGER NOT NULL DEFAULT 0 CHECK (cost_assumed IN (0, 1)),
  recovered      INTEGER NOT NULL DEFAULT 0 CHECK (recovered IN (0, 1)),
  PRIMARY KEY (run_id, task_id)
) STRICT;
INSERT INTO tasks_v2 (run_id, task_id, seq, model, endpoint, body, body_hash, est_tokens, est_min, est_max,
  est_basis, est_assumed, state, img_uuid, cost, refunded, error, submitted_at, finished_at, job_status,
  job_duration, last_polled_at, next_poll_at, poll_count, source, updated_at)
SELECT run_id, task_id, seq, model, endpoint, body, body_hash, est_tokens, est_min, est_max,
  est_basis, est_assumed, state, img_uuid, cost, refunded, error, submitted_at, finished_at, job_status,
  job_duration, last_polled_at, next_poll_at, poll_count, source, updated_at FROM tasks;
DROP TABLE tasks;
ALTER TABLE tasks_v2 RENAME TO tasks;
CREATE UNIQUE INDEX tasks_by_img_uuid ON tasks (img_uuid) WHERE img_uuid IS NOT NULL;
CREATE INDEX tasks_by_state ON tasks (run_id, state, seq);
CREATE INDEX tasks_due_for_poll ON tasks (run_id, next_poll_at) WHERE state IN ('submitted', 'running', 'stalled');

-- A charge whose amount the API did not state is booked at list price and marked as such.
ALTER TABLE ledger ADD COLUMN assumed INTEGER NOT NULL DEFAULT 0 CHECK (assumed IN (0, 1));
`,
  },
  {
    id: 3,
    name: 'runs: first start, active time, and the API and key they belong to; tasks: file name',
    sql: `
ALTER TABLE runs ADD COLUMN first_started_at TEXT;
UPDATE runs SET first_started_at = coalesce(started_at, created_at);
ALTER TABLE runs ADD COLUMN active_ms INTEGER NOT NULL DEFAULT 0 CHECK (active_ms >= 0);
ALTER TABLE runs ADD COLUMN api_base_url TEXT;
ALTER TABLE runs ADD COLUMN key_fingerprint TEXT;
ALTER TABLE tasks ADD COLUMN file_name TEXT;
`,
  },
  {
    id: 4,
    name: 'tasks: expected job duration, so the longest go first',
    sql: `
-- The middle of the catalog's expected duration for the task's request, in ms; 0 for tasks stored before.
ALTER TABLE tasks ADD COLUMN expected_ms INTEGER NOT NULL DEFAULT 0 CHECK (expected_ms >= 0);
-- The next pending tasks, longest first, without a sort over every pending task (1,000,000 at scale).
CREATE INDEX tasks_pending_longest ON tasks (run_id, state, expected_ms DESC, seq);
`,
  },
  {
    id: 5,
    name: 'task_counts: tasks per run and state, kept by triggers, so progress never counts every task',
    sql: `
CREATE TABLE task_counts (
  run_id TEXT NOT NULL,
  state  TEXT NOT NULL,
  n      INTEGER NOT NULL CHECK (n >= 0),
  PRIMARY KEY (run_id, state)
) STRICT, WITHOUT ROWID;
INSERT INTO task_counts (run_id, state, n) SELECT run_id, state, count(*) FROM tasks GROUP BY run_id, state;

-- In the same transaction as the change itself: the counts are exactly the tasks, across any crash.
-- New tasks are counted by the store's insert, once per batch: a trigger per row made adding a
-- million tasks a third slower.
CREATE TRIGGER task_counts_move AFTER UPDATE OF state ON tasks WHEN OLD.state IS NOT NEW.state BEGIN
  UPDATE task_counts SET n = n - 1 WHERE run_id = OLD.run_id AND state = OLD.state;
  INSERT INTO task_counts (run_id, state, n) VALUES (NEW.run_id, NEW.state, 1)
    ON CONFLICT (run_id, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks BEGIN
  UPDATE task_counts SET n = n - 1 WHERE run_id = OLD.run_id AND state = OLD.state;
END;
`,
  },
  {
    id: 6,
    name: 'runs: what the report on disk was written from',
    sql: `
ALTER TABLE runs ADD COLUMN report_basis TEXT;
`,
  },
  {
    id: 7,
    name: 'chains: the tasks a task waits for, and the request as planned before its references are filled in',
    sql: `
-- One row per upstream of a chained task (\`after\`); name '' for the lone form. The upstream is a task of
-- the same run, inserted in the same transaction (not a foreign key: it may come later in the manifest).
CREATE TABLE task_upstreams (
  run_id      TEXT NOT NULL,
  task_id     TEXT NOT NULL,
  name        TEXT NOT NULL,
  upstream_id TEXT NOT NULL,
  PRIMARY KEY (run_id, task_id, name),
  FOREIGN KEY (run_id, task_id) REFERENCES tasks (run_id, task_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX task_upstreams_by_upstream ON task_upstreams (run_id, upstream_id);

-- Set when a chained task's references are filled in (just before it is submitted): the request and the
-- estimate of the plan, so a resumed run compares the manifest with what was planned, and the report
-- shows the estimate beside the exact price. NULL while the stored request is the planned one.
ALTER TABLE tasks ADD COLUMN planned_body TEXT;
ALTER TABLE tasks ADD COLUMN planned_estimate TEXT CHECK (planned_estimate IS NULL OR json_valid(planned_estimate));
`,
  },
  {
    id: 8,
    name: 'uploads: local input files already in a bucket, by content',
    sql: `
-- A local input uploaded once: its object is named by its SHA-256, so a rerun or another
-- manifest that uses the same bytes finds it here and uploads nothing. \`storage\` names the bucket
-- (endpoint and bucket), never a credential.
CREATE TABLE uploads (
  storage     TEXT NOT NULL,
  key         TEXT NOT NULL,
  sha256      TEXT NOT NULL CHECK (length(sha256) = 64),
  bytes       INTEGER NOT NULL CHECK (bytes >= 0),
  uploaded_at TEXT NOT NULL,
  PRIMARY KEY (storage, key)
) STRICT, WITHOUT ROWID;
`,
  },
  {
    id: 9,
    name: 'chains: how many upstreams each task still waits for, kept by triggers',
    sql: `
-- The upstreams of a task not done yet. The next task to submit is a pending one with none, found through
-- an index: a run of 50,000 avatars waiting for their speech never scans them to find a ready one.
ALTER TABLE tasks ADD COLUMN waits INTEGER NOT NULL DEFAULT 0 CHECK (waits >= 0);
UPDATE tasks SET waits = (
  SELECT count(*) FROM task_upstreams u
  WHERE u.run_id = tasks.run_id AND u.task_id = tasks.task_id
    AND (SELECT up.state FROM tasks up WHERE up.run_id = u.run_id AND up.task_id = u.upstream_id) IS NOT 'done')
WHERE EXISTS (SELECT 1 FROM task_upstreams u WHERE u.run_id = tasks.run_id AND u.task_id = tasks.task_id);
-- The longest-first index gains waits before the order (every task of a run without chains has 0), and
-- the index by state carries it after seq, so the manifest's order skips waiting tasks inside the index.
-- Replaced, not added: a million inserts keep the cost of the indexes they had.
DROP INDEX tasks_pending_longest;
CREATE INDEX tasks_ready_longest ON tasks (run_id, state, waits, expected_ms DESC, seq);
DROP INDEX tasks_by_state;
CREATE INDEX tasks_by_state ON tasks (run_id, state, seq, waits);

-- An upstream missing from the run counts as not done, like one that is.
CREATE TRIGGER task_upstreams_add AFTER INSERT ON task_upstreams BEGIN
  UPDATE tasks SET waits = waits + 1 WHERE run_id = NEW.run_id AND task_id = NEW.task_id
    AND (SELECT state FROM tasks WHERE run_id = NEW.run_id AND task_id = NEW.upstream_id) IS NOT 'done';
END;
CREATE TRIGGER task_upstreams_remove AFTER DELETE ON task_upstreams BEGIN
  UPDATE tasks SET waits = waits - 1 WHERE run_id = OLD.run_id AND task_id = OLD.task_id
    AND (SELECT state FROM tasks WHERE run_id = OLD.run_id AND task_id = OLD.upstream_id) IS NOT 'done';
END;
CREATE TRIGGER task_upstream_done AFTER UPDATE OF state ON tasks
  WHEN NEW.state = 'done' AND OLD.state IS NOT 'done' BEGIN
  UPDATE tasks SET waits = waits - 1 WHERE run_id = NEW.run_id
    AND task_id IN (SELECT task_id FROM task_upstreams WHERE run_id = NEW.run_id AND upstream_id = NEW.task_id);
END;
CREATE TRIGGER task_upstream_undone AFTER UPDATE OF state ON tasks
  WHEN OLD.state = 'done' AND NEW.state IS NOT 'done' BEGIN
  UPDATE tasks SET waits = waits + 1 WHERE run_id = NEW.run_id
    AND task_id IN (SELECT task_id FROM task_upstreams WHERE run_id = NEW.run_id AND upstream_id = NEW.task_id);
END;
`,
  },
  {
    id: 10,
    name: 'view: finished tasks by time, for the newest results first',
    sql: `
-- \`mediabatch view\` lists a run's results newest first, a page at a time by keyset (finished_at, task_id):
-- the first page of a 1,000,000-task run is read from this index without a sort. Partial, so a task is
-- written into it once, when it finishes (polls and submissions never touch it).
CREATE INDEX tasks_by_finished ON tasks (run_id, finished_at, task_id) WHERE finished_at IS NOT NULL;
`,
  },
  {
    id: 11,
    name: 'review: decisions, the states skipped, reviewed tasks, attempts of a task, and waits that need approval',
    rebuildsTables: true,
    sql: `
-- A new state (skipped) needs the CHECK rebuilt. \`review\`: the result must be approved before a
-- downstream uses it; \`verdict\`: the decision on the current result (NULL: none yet); \`attempt\`: 1, then
-- 2, 3… after each re-roll; \`version\`: moves whenever a reviewed task's state, verdict or attempt does, so
-- a decision taken on what a person saw earlier is refused.
CREATE TABLE tasks_v11 (
  run_id           TEXT NOT NULL REFERENCES runs (id),
  task_id          TEXT NOT NULL,
  seq              INTEGER NOT NULL,
  model            TEXT NOT NULL,
  endpoint         TEXT NOT NULL,
  body             TEXT NOT NULL,
  body_hash        TEXT NOT NULL,
  est_tokens       REAL NOT NULL,
  est_min          REAL NOT NULL,
  est_max          REAL NOT NULL,
  est_basis        TEXT NOT NULL,
  est_assumed      INTEGER NOT NULL CHECK (est_assumed IN (0, 1)),
  state            TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'submitting', 'in_doubt',
                     'submitted', 'running', 'stalled', 'downloading', 'unfetched', 'done', 'failed',
                     'rejected', 'blocked', 'lost', 'skipped')),
  img_uuid         TEXT,
  cost             REAL,
  refunded         REAL,
  error            TEXT,
  submitted_at     TEXT,
  finished_at      TEXT,
  job_status       TEXT,
  job_duration     REAL,
  last_polled_at   TEXT,
  next_poll_at     TEXT,
  poll_count       INTEGER NOT NULL DEFAULT 0,
  source           TEXT CHECK (source IN ('poll', 'callback')),
  updated_at       TEXT NOT NULL,
  retries          INTEGER NOT NULL DEFAULT 0 CHECK (retries >= 0),
  cost_assumed     INTEGER NOT NULL DEFAULT 0 CHECK (cost_assumed IN (0, 1)),
  recovered        INTEGER NOT NULL DEFAULT 0 CHECK (recovered IN (0, 1)),
  file_name        TEXT,
  expected_ms      INTEGER NOT NULL DEFAULT 0 CHECK (expected_ms >= 0),
  planned_body     TEXT,
  planned_estimate TEXT CHECK (planned_estimate IS NULL OR json_valid(planned_estimate)),
  waits            INTEGER NOT NULL DEFAULT 0 CHECK (waits >= 0),
  review           INTEGER NOT NULL DEFAULT 0 CHECK (review IN (0, 1)),
  verdict          TEXT CHECK (verdict IN ('approved', 'rejected')),
  attempt          INTEGER NOT NULL DEFAULT 1 CHECK (attempt >= 1),
  version          INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1),
  PRIMARY KEY (run_id, task_id)
) STRICT;
INSERT INTO tasks_v11 (run_id, task_id, seq, model, endpoint, body, body_hash, est_tokens, est_min, est_max,
  est_basis, est_assumed, state, img_uuid, cost, refunded, error, submitted_at, finished_at, job_status,
  job_duration, last_polled_at, next_poll_at, poll_count, source, updated_at, retries, cost_assumed, recovered,
  file_name, expected_ms, planned_body, planned_estimate, waits) SELECT run_id, task_id, seq, model, endpoint, body, body_hash, est_tokens, est_min, est_max,
  est_basis, est_assumed, state, img_uuid, cost, refunded, error, submitted_at, finished_at, job_status,
  job_duration, last_polled_at, next_poll_at, poll_count, source, updated_at, retries, cost_assumed, recovered,
  file_name, expected_ms, planned_body, planned_estimate, waits FROM tasks;
-- Triggers on task_upstreams name tasks: they go before it does (a rename checks every trigger).
DROP TRIGGER task_upstreams_add;
DROP TRIGGER task_upstreams_remove;
DROP TABLE tasks;
ALTER TABLE tasks_v11 RENAME TO tasks;
CREATE UNIQUE INDEX tasks_by_img_uuid ON tasks (img_uuid) WHERE img_uuid IS NOT NULL;
CREATE INDEX tasks_due_for_poll ON tasks (run_id, next_poll_at) WHERE state IN ('submitted', 'running', 'stalled');
CREATE INDEX tasks_ready_longest ON tasks (run_id, state, waits, expected_ms DESC, seq);
CREATE INDEX tasks_by_state ON tasks (run_id, state, seq, waits);
-- The reviewed tasks of a run (those a person decides on): found without a scan of a large run's others.
CREATE INDEX tasks_reviewed ON tasks (run_id, state, seq) WHERE review = 1;

CREATE TRIGGER task_counts_move AFTER UPDATE OF state ON tasks WHEN OLD.state IS NOT NEW.state BEGIN
  UPDATE task_counts SET n = n - 1 WHERE run_id = OLD.run_id AND state = OLD.state;
  INSERT INTO task_counts (run_id, state, n) VALUES (NEW.run_id, NEW.state, 1)
    ON CONFLICT (run_id, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks BEGIN
  UPDATE task_counts SET n = n - 1 WHERE run_id = OLD.run_id AND state = OLD.state;
END;

-- \`waits\` counts the upstreams that do not give their result yet: not done, or reviewed and not approved.
-- A downstream of a result nobody chose is never ready, whatever code path looks for ready tasks.
CREATE TRIGGER task_upstreams_add AFTER INSERT ON task_upstreams BEGIN
  UPDATE tasks SET waits = waits + 1 WHERE run_id = NEW.run_id AND task_id = NEW.task_id
    AND NOT coalesce((SELECT state = 'done' AND (review = 0 OR verdict IS 'approved') FROM tasks
                      WHERE run_id = NEW.run_id AND task_id = NEW.upstream_id), 0);
END;
CREATE TRIGGER task_upstreams_remove AFTER DELETE ON task_upstreams BEGIN
  UPDATE tasks SET waits = waits - 1 WHERE run_id = OLD.run_id AND task_id = OLD.task_id
    AND NOT coalesce((SELECT state = 'done' AND (review = 0 OR verdict IS 'approved') FROM tasks
                      WHERE run_id = OLD.run_id AND task_id = OLD.upstream_id), 0);
END;
CREATE TRIGGER task_upstream_done AFTER UPDATE OF state, review, verdict ON tasks
  WHEN (NEW.state = 'done' AND (NEW.review = 0 OR NEW.verdict IS 'approved'))
   AND NOT (OLD.state = 'done' AND (OLD.review = 0 OR OLD.verdict IS 'approved')) BEGIN
  UPDATE tasks SET waits = waits - 1 WHERE run_id = NEW.run_id
    AND task_id IN (SELECT task_id FROM task_upstreams WHERE run_id = NEW.run_id AND upstream_id = NEW.task_id);
END;
CREATE TRIGGER task_upstream_undone AFTER UPDATE OF state, review, verdict ON tasks
  WHEN (OLD.state = 'done' AND (OLD.review = 0 OR OLD.verdict IS 'approved'))
   AND NOT (NEW.state = 'done' AND (NEW.review = 0 OR NEW.verdict IS 'approved')) BEGIN
  UPDATE tasks SET waits = waits + 1 WHERE run_id = NEW.run_id
    AND task_id IN (SELECT task_id FROM task_upstreams WHERE run_id = NEW.run_id AND upstream_id = NEW.task_id);
END;
-- Only reviewed tasks pay for a version; it is what a decision names as "what I saw".
CREATE TRIGGER task_review_version AFTER UPDATE OF state, verdict, attempt ON tasks
  WHEN NEW.review = 1 AND (OLD.state IS NOT NEW.state OR OLD.verdict IS NOT NEW.verdict OR OLD.attempt IS NOT NEW.attempt) BEGIN
  UPDATE tasks SET version = version + 1 WHERE run_id = NEW.run_id AND task_id = NEW.task_id;
END;

-- Every decision a person took on a reviewed result: approve, reject, or reroll (reject and generate
-- again, a new attempt). \`attempt\` and \`version\`: the result and the version it was taken on.
CREATE TABLE decisions (
  id         INTEGER PRIMARY KEY,
  run_id     TEXT NOT NULL,
  task_id    TEXT NOT NULL,
  attempt    INTEGER NOT NULL CHECK (attempt >= 1),
  verdict    TEXT NOT NULL CHECK (verdict IN ('approve', 'reject', 'reroll')),
  note       TEXT,
  decided_by TEXT NOT NULL,
  decided_at TEXT NOT NULL,
  version    INTEGER NOT NULL,
  FOREIGN KEY (run_id, task_id) REFERENCES tasks (run_id, task_id)
) STRICT;
CREATE INDEX decisions_by_task ON decisions (run_id, task_id, id);

-- A charge of a re-roll (a task's attempt after the first) is the user's second ask, shown apart.
ALTER TABLE ledger ADD COLUMN reroll INTEGER NOT NULL DEFAULT 0 CHECK (reroll IN (0, 1));
`,
  },
  {
    id: 12,
    name: "view: the index of finished tasks again, after review's rebuild of tasks",
    sql: `
-- Migration 11 rebuilt the tasks table (a new state needs its CHECK rebuilt) and with it dropped the
-- index of migration 10, which the two branches wrote at the same time.
CREATE INDEX IF NOT EXISTS tasks_by_finished ON tasks (run_id, finished_at, task_id) WHERE finished_at IS NOT NULL;
`,
  },
  {
    id: 13,
    name: 'money in the store: run budgets, ledger totals per run, reservations of worst cases',
    sql: `
-- The budget every spender of a run checks (the runner, review, the view): set from the run's settings
-- when the run is created and by each runner for the budget it works under. Totals of the run's ledger
-- in micro-tokens, kept by a trigger, so a reservation checks the budget without summing the ledger.
CREATE TABLE run_money (
  run_id   TEXT PRIMARY KEY REFERENCES runs (id),
  budget   INTEGER CHECK (budget IS NULL OR budget >= 0),
  charged  INTEGER NOT NULL DEFAULT 0 CHECK (charged >= 0),
  refunded INTEGER NOT NULL DEFAULT 0 CHECK (refunded >= 0)
) STRICT;
INSERT INTO run_money (run_id, budget, charged, refunded)
  SELECT r.id,
    CASE WHEN json_type(r.settings, '$.budget') IN ('integer', 'real') AND json_extract(r.settings, '$.budget') > 0
      THEN CAST(round(json_extract(r.settings, '$.budget') * 1000000) AS INTEGER) END,
    coalesce((SELECT sum(CAST(round(l.tokens * 1000000) AS INTEGER)) FROM ledger l
      WHERE l.run_id = r.id AND l.kind = 'charge'), 0),
    coalesce((SELECT sum(CAST(round(l.tokens * 1000000) AS INTEGER)) FROM ledger l
      WHERE l.run_id = r.id AND l.kind = 'refund'), 0)
  FROM runs r;
CREATE TRIGGER run_money_created AFTER INSERT ON runs BEGIN
  INSERT INTO run_money (run_id, budget) VALUES (NEW.id,
    CASE WHEN json_type(NEW.settings, '$.budget') IN ('integer', 'real') AND json_extract(NEW.settings, '$.budget') > 0
      THEN CAST(round(json_extract(NEW.settings, '$.budget') * 1000000) AS INTEGER) END)
  ON CONFLICT (run_id) DO NOTHING;
END;
CREATE TRIGGER run_money_settings AFTER UPDATE OF settings ON runs BEGIN
  UPDATE run_money SET budget =
    CASE WHEN json_type(NEW.settings, '$.budget') IN ('integer', 'real') AND json_extract(NEW.settings, '$.budget') > 0
      THEN CAST(round(json_extract(NEW.settings, '$.budget') * 1000000) AS INTEGER) END
  WHERE run_id = NEW.id;
END;
CREATE TRIGGER run_money_ledger AFTER INSERT ON ledger BEGIN
  INSERT INTO run_money (run_id) VALUES (NEW.run_id) ON CONFLICT (run_id) DO NOTHING;
  UPDATE run_money SET
    charged = charged + CASE WHEN NEW.kind = 'charge' THEN CAST(round(NEW.tokens * 1000000) AS INTEGER) ELSE 0 END,
    refunded = refunded + CASE WHEN NEW.kind = 'refund' THEN CAST(round(NEW.tokens * 1000000) AS INTEGER) ELSE 0 END
  WHERE run_id = NEW.run_id;
END;

-- Every spend's worst case, reserved in the transaction that records its intent and only if the budget
-- holds it. held: asked for or sent, no answer yet; doubt: sent, answer lost (may have been charged);
-- settled: answered with a charge (the ledger has it now); released: known not charged, or given up.
CREATE TABLE reservations (
  id          INTEGER PRIMARY KEY,
  run_id      TEXT NOT NULL REFERENCES runs (id),
  task_id     TEXT NOT NULL,
  kind        TEXT NOT NULL CHECK (kind IN ('first', 'retry', 'reroll', 'doubt')),
  amount      INTEGER NOT NULL CHECK (amount >= 0),
  state       TEXT NOT NULL CHECK (state IN ('held', 'doubt', 'settled', 'released')),
  charged     INTEGER CHECK (charged IS NULL OR charged >= 0),
  reserved_at TEXT NOT NULL,
  closed_at   TEXT,
  FOREIGN KEY (run_id, task_id) REFERENCES tasks (run_id, task_id)
) STRICT;
-- A task holds at most one open reservation; the open ones of a run (a few dozen: the tasks in flight,
-- in doubt or re-rolled) are summed through it too. One index: each one more is written at every answer.
CREATE UNIQUE INDEX reservations_open ON reservations (run_id, task_id) WHERE state IN ('held', 'doubt');
-- A task that leaves the queue without being sent (blocked, skipped, rejected unsent) gives its held
-- worst case back; a task in doubt sent back to the queue by the user (--retry-in-doubt) gives its
-- doubt up: its next intent reserves anew.
CREATE TRIGGER reservations_unsent AFTER UPDATE OF state ON tasks
  WHEN OLD.state = 'pending' AND NEW.state NOT IN ('pending', 'submitting') BEGIN
  UPDATE reservations SET state = 'released', closed_at = NEW.updated_at
  WHERE run_id = NEW.run_id AND task_id = NEW.task_id AND state IN ('held', 'doubt') AND state = 'held';
END;
CREATE TRIGGER reservations_requeued AFTER UPDATE OF state ON tasks
  WHEN OLD.state = 'in_doubt' AND NEW.state = 'pending' BEGIN
  UPDATE reservations SET state = 'released', closed_at = NEW.updated_at
  WHERE run_id = NEW.run_id AND task_id = NEW.task_id AND state IN ('held', 'doubt') AND state = 'doubt';
END;
-- What earlier versions kept in memory: tasks in doubt or being sent keep their worst case, and
-- re-rolls asked for and not sent yet hold theirs.
INSERT INTO reservations (run_id, task_id, kind, amount, state, reserved_at)
  SELECT run_id, task_id, 'first', CAST(round(est_max * 1000000) AS INTEGER), 'doubt', updated_at
  FROM tasks WHERE state IN ('in_doubt', 'submitting');
INSERT INTO reservations (run_id, task_id, kind, amount, state, reserved_at)
  SELECT run_id, task_id, 'reroll', CAST(round(est_max * 1000000) AS INTEGER), 'held', updated_at
  FROM tasks WHERE review = 1 AND attempt > 1 AND state = 'pending';
`,
  },
  {
    id: 14,
    name: 'workers of a run, tasks claimed by a worker, attempts sent by one',
    sql: `
-- Each process driving a run (a worker; several on a PostgreSQL state) has a row, renewed by its
-- heartbeat. \`lost_at\`: another worker found it dead (expired, or its pid gone on that host) and took its
-- work back; a heartbeat after that is refused, so the lost one stops.
CREATE TABLE workers (
  run_id       TEXT NOT NULL REFERENCES runs (id),
  worker_id    TEXT NOT NULL,
  host         TEXT NOT NULL,
  pid          INTEGER NOT NULL,
  started_at   TEXT NOT NULL,
  heartbeat_at TEXT NOT NULL,
  expires_at   TEXT NOT NULL,
  stopped_at   TEXT,
  lost_at      TEXT,
  in_flight    INTEGER NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
  submitted    INTEGER NOT NULL DEFAULT 0 CHECK (submitted >= 0),
  PRIMARY KEY (run_id, worker_id)
) STRICT;
-- The worker a task belongs to: the one that claimed it from the queue, sent it, or adopted its job.
ALTER TABLE tasks ADD COLUMN claimed_by TEXT;
CREATE INDEX tasks_claimed ON tasks (run_id, claimed_by) WHERE claimed_by IS NOT NULL;
-- Which worker sent an attempt.
ALTER TABLE attempts ADD COLUMN worker_id TEXT;
`,
  },
  {
    id: 15,
    name: "the account's sums per run, kept by triggers: estimates per state, money per kind of job",
    sql: `
-- The estimate of the tasks in each state, in micro-tokens, beside their count: the account's estimate
-- (every state but skipped), worst case left (pending and submitting) and in doubt are a few rows then,
-- never a pass over a million tasks. Kept by the trigger that moves the count, which now also follows
-- an estimate changed in place.
ALTER TABLE task_counts ADD COLUMN est_micro INTEGER NOT NULL DEFAULT 0 CHECK (est_micro >= 0);
ALTER TABLE task_counts ADD COLUMN est_min_micro INTEGER NOT NULL DEFAULT 0 CHECK (est_min_micro >= 0);
ALTER TABLE task_counts ADD COLUMN est_max_micro INTEGER NOT NULL DEFAULT 0 CHECK (est_max_micro >= 0);
UPDATE task_counts SET est_micro = s.est, est_min_micro = s.est_min, est_max_micro = s.est_max
FROM (SELECT run_id, state, sum(CAST(round(est_tokens * 1000000) AS INTEGER)) AS est,
        sum(CAST(round(est_min * 1000000) AS INTEGER)) AS est_min,
        sum(CAST(round(est_max * 1000000) AS INTEGER)) AS est_max
      FROM tasks GROUP BY run_id, state) AS s
WHERE task_counts.run_id = s.run_id AND task_counts.state = s.state;
DROP TRIGGER task_counts_move;
CREATE TRIGGER task_counts_move AFTER UPDATE OF state, est_tokens, est_min, est_max ON tasks
  WHEN OLD.state IS NOT NEW.state OR OLD.est_tokens IS NOT NEW.est_tokens OR OLD.est_min IS NOT NEW.est_min
    OR OLD.est_max IS NOT NEW.est_max BEGIN
  UPDATE task_counts SET n = n - 1,
    est_micro = est_micro - CAST(round(OLD.est_tokens * 1000000) AS INTEGER),
    est_min_micro = est_min_micro - CAST(round(OLD.est_min * 1000000) AS INTEGER),
    est_max_micro = est_max_micro - CAST(round(OLD.est_max * 1000000) AS INTEGER)
  WHERE run_id = OLD.run_id AND state = OLD.state;
  INSERT INTO task_counts (run_id, state, n, est_micro, est_min_micro, est_max_micro)
    VALUES (NEW.run_id, NEW.state, 1, CAST(round(NEW.est_tokens * 1000000) AS INTEGER),
      CAST(round(NEW.est_min * 1000000) AS INTEGER), CAST(round(NEW.est_max * 1000000) AS INTEGER))
    ON CONFLICT (run_id, state) DO UPDATE SET n = n + 1, est_micro = est_micro + excluded.est_micro,
      est_min_micro = est_min_micro + excluded.est_min_micro, est_max_micro = est_max_micro + excluded.est_max_micro;
END;
DROP TRIGGER task_counts_delete;
CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks BEGIN
  UPDATE task_counts SET n = n - 1,
    est_micro = est_micro - CAST(round(OLD.est_tokens * 1000000) AS INTEGER),
    est_min_micro = est_min_micro - CAST(round(OLD.est_min * 1000000) AS INTEGER),
    est_max_micro = est_max_micro - CAST(round(OLD.est_max * 1000000) AS INTEGER)
  WHERE run_id = OLD.run_id AND state = OLD.state;
END;

-- What each job's money was spent on, decided when its charge is booked: a re-roll when the ledger says
-- so; else the last earlier answer of its task, before its own attempt: in doubt makes a retry of doubt,
-- a job refunded (failed) an automatic retry, a job kept a sending again, none the first job. A refund
-- is of its charge's kind. Its own attempt: the one that carries its job; while the charge is booked
-- (before the answer is recorded on it) the attempt still waiting for its answer, or for a job found
-- for an answer in doubt the last attempt in doubt; else the latest.
ALTER TABLE ledger ADD COLUMN money_kind TEXT
  CHECK (money_kind IN ('first', 'retry', 'reroll', 'doubt_retry', 'sent_again'));
UPDATE ledger SET money_kind = CASE WHEN reroll = 1 THEN 'reroll' ELSE coalesce((
    SELECT CASE WHEN b.outcome = 'in_doubt' THEN 'doubt_retry'
      WHEN EXISTS (SELECT 1 FROM ledger r WHERE r.img_uuid = b.img_uuid AND r.kind = 'refund') THEN 'retry'
      ELSE 'sent_again' END
    FROM attempts b
    WHERE b.run_id = ledger.run_id AND b.task_id = ledger.task_id AND b.outcome IN ('in_doubt', 'submitted')
      AND b.attempt_no < coalesce(
        (SELECT o.attempt_no FROM attempts o
         WHERE o.run_id = ledger.run_id AND o.task_id = ledger.task_id AND o.img_uuid = ledger.img_uuid),
        (SELECT max(o.attempt_no) FROM attempts o
           WHERE o.run_id = ledger.run_id AND o.task_id = ledger.task_id AND o.outcome IS NULL),
          (SELECT max(o.attempt_no) FROM attempts o
           WHERE o.run_id = ledger.run_id AND o.task_id = ledger.task_id AND o.outcome = 'in_doubt'),
          (SELECT max(o.attempt_no) FROM attempts o WHERE o.run_id = ledger.run_id AND o.task_id = ledger.task_id), 0)
    ORDER BY b.attempt_no DESC LIMIT 1), 'first') END
WHERE kind = 'charge';
UPDATE ledger SET money_kind = coalesce((SELECT c.money_kind FROM ledger c
  WHERE c.img_uuid = ledger.img_uuid AND c.kind = 'charge'), 'first')
WHERE kind = 'refund';

-- The run's money per kind of job, in micro-tokens: jobs charged, tasks with such a job, charged,
-- refunded. The account reads five rows, whatever the size of the run.
CREATE TABLE account_money (
  run_id   TEXT NOT NULL,
  kind     TEXT NOT NULL CHECK (kind IN ('first', 'retry', 'reroll', 'doubt_retry', 'sent_again')),
  jobs     INTEGER NOT NULL DEFAULT 0 CHECK (jobs >= 0),
  tasks    INTEGER NOT NULL DEFAULT 0 CHECK (tasks >= 0),
  charged  INTEGER NOT NULL DEFAULT 0 CHECK (charged >= 0),
  refunded INTEGER NOT NULL DEFAULT 0 CHECK (refunded >= 0),
  PRIMARY KEY (run_id, kind)
) STRICT, WITHOUT ROWID;
INSERT INTO account_money (run_id, kind, jobs, tasks, charged, refunded)
  SELECT run_id, money_kind, count(CASE WHEN kind = 'charge' THEN 1 END),
    count(DISTINCT CASE WHEN kind = 'charge' THEN task_id END),
    coalesce(sum(CASE WHEN kind = 'charge' THEN CAST(round(tokens * 1000000) AS INTEGER) END), 0),
    coalesce(sum(CASE WHEN kind = 'refund' THEN CAST(round(tokens * 1000000) AS INTEGER) END), 0)
  FROM ledger GROUP BY run_id, money_kind;

-- In the transaction that books the charge or refund.
CREATE TRIGGER account_money_kind AFTER INSERT ON ledger BEGIN
  UPDATE ledger SET money_kind = CASE
    WHEN NEW.kind = 'refund' THEN coalesce((SELECT c.money_kind FROM ledger c
      WHERE c.img_uuid = NEW.img_uuid AND c.kind = 'charge'), 'first')
    WHEN NEW.reroll = 1 THEN 'reroll'
    ELSE coalesce((
      SELECT CASE WHEN b.outcome = 'in_doubt' THEN 'doubt_retry'
        WHEN EXISTS (SELECT 1 FROM ledger r WHERE r.img_uuid = b.img_uuid AND r.kind = 'refund') THEN 'retry'
        ELSE 'sent_again' END
      FROM attempts b
      WHERE b.run_id = NEW.run_id AND b.task_id = NEW.task_id AND b.outcome IN ('in_doubt', 'submitted')
        AND b.attempt_no < coalesce(
          (SELECT o.attempt_no FROM attempts o
           WHERE o.run_id = NEW.run_id AND o.task_id = NEW.task_id AND o.img_uuid = NEW.img_uuid),
          (SELECT max(o.attempt_no) FROM attempts o
           WHERE o.run_id = NEW.run_id AND o.task_id = NEW.task_id AND o.outcome IS NULL),
          (SELECT max(o.attempt_no) FROM attempts o
           WHERE o.run_id = NEW.run_id AND o.task_id = NEW.task_id AND o.outcome = 'in_doubt'),
          (SELECT max(o.attempt_no) FROM attempts o WHERE o.run_id = NEW.run_id AND o.task_id = NEW.task_id), 0)
      ORDER BY b.attempt_no DESC LIMIT 1), 'first') END
  WHERE id = NEW.id;
  INSERT INTO account_money (run_id, kind, jobs, tasks, charged, refunded)
    SELECT NEW.run_id, l.money_kind, NEW.kind = 'charge',
      NEW.kind = 'charge' AND NOT EXISTS (SELECT 1 FROM ledger o WHERE o.run_id = NEW.run_id
        AND o.task_id = NEW.task_id AND o.kind = 'charge' AND o.money_kind = l.money_kind AND o.id <> NEW.id),
      CASE WHEN NEW.kind = 'charge' THEN CAST(round(NEW.tokens * 1000000) AS INTEGER) ELSE 0 END,
      CASE WHEN NEW.kind = 'refund' THEN CAST(round(NEW.tokens * 1000000) AS INTEGER) ELSE 0 END
    FROM ledger l WHERE l.id = NEW.id
    ON CONFLICT (run_id, kind) DO UPDATE SET jobs = jobs + excluded.jobs, tasks = tasks + excluded.tasks,
      charged = charged + excluded.charged, refunded = refunded + excluded.refunded;
END;
`,
  },
  {
    id: 16,
    name: "a schedule's period budget in the store: the period a fired run spends from, ledger totals per manifest and period",
    sql: `
-- A run the scheduler fired spends from its manifest's budget_per_period of the period it was fired in:
-- each reservation of the run checks that cap too, against every run of the manifest (period_money).
ALTER TABLE run_money ADD COLUMN period TEXT CHECK (period IS NULL OR period GLOB '[0-9][0-9][0-9][0-9]-[0-1][0-9]');
ALTER TABLE run_money ADD COLUMN period_budget INTEGER CHECK (period_budget IS NULL OR period_budget >= 0);
-- The ledger's totals per manifest and period (a refund counts in its charge's period, as the ledger
-- files it), kept by a trigger, so a reservation checks the period without summing a month of ledger.
CREATE TABLE period_money (
  manifest_path TEXT NOT NULL,
  period        TEXT NOT NULL,
  charged       INTEGER NOT NULL DEFAULT 0 CHECK (charged >= 0),
  refunded      INTEGER NOT NULL DEFAULT 0 CHECK (refunded >= 0),
  PRIMARY KEY (manifest_path, period)
) STRICT;
INSERT INTO period_money (manifest_path, period, charged, refunded)
  SELECT r.manifest_path, l.period,
    coalesce(sum(CASE WHEN l.kind = 'charge' THEN CAST(round(l.tokens * 1000000) AS INTEGER) END), 0),
    coalesce(sum(CASE WHEN l.kind = 'refund' THEN CAST(round(l.tokens * 1000000) AS INTEGER) END), 0)
  FROM ledger l JOIN runs r ON r.id = l.run_id GROUP BY r.manifest_path, l.period;
CREATE TRIGGER period_money_ledger AFTER INSERT ON ledger BEGIN
  INSERT INTO period_money (manifest_path, period, charged, refunded)
    SELECT manifest_path, NEW.period,
      CASE WHEN NEW.kind = 'charge' THEN CAST(round(NEW.tokens * 1000000) AS INTEGER) ELSE 0 END,
      CASE WHEN NEW.kind = 'refund' THEN CAST(round(NEW.tokens * 1000000) AS INTEGER) ELSE 0 END
    FROM runs WHERE id = NEW.run_id
  ON CONFLICT (manifest_path, period) DO UPDATE SET
    charged = charged + excluded.charged, refunded = refunded + excluded.refunded;
END;
`,
  },
  {
    id: 17,
    name: "chains: the waits of a new run's links counted once per statement, not once per link",
    // PostgreSQL's trigger changes (src/store/pg/migrations.ts); SQLite's trigger per link is a function
    // call in the same process and stays. The number is taken on both, so that a schema number means the
    // same on either backend.
    sql: `SELECT 1;`,
  },
  {
    id: 18,
    name: 'why a run stopped: its reason, its line and when, kept with the run until it starts again',
    sql: `
-- The first reason that stopped the run (the runner's: budget, period-budget, insufficient-tokens,
-- quota-exceeded, interrupted, …), the one line the user was told, and when. A run that starts again
-- or finishes has none.
ALTER TABLE runs ADD COLUMN stop_reason TEXT;
ALTER TABLE runs ADD COLUMN stop_message TEXT;
ALTER TABLE runs ADD COLUMN stopped_at TEXT;
`,
  },
  ...takenOnPostgres([19, 20, 21, 22, 23, 24, 25, 26, 27]),
  {
    id: 28,
    name: "a schedule's claim of a firing: who holds it and until when, until its run is made",
    sql: `
-- A scheduler claims a slot (last_fired_at) before it makes the slot's run; one killed in between left
-- the slot counted with no run. The claim names its holder (pid@host#nonce) and lives until claim_expires_at,
-- renewed by the holder's heartbeat, and is settled (NULL) once the run is made, the slot skipped or the
-- firing ended: a claim that outlives its holder (expired, or its process gone) is taken over by another.
ALTER TABLE schedules ADD COLUMN claim_holder TEXT;
ALTER TABLE schedules ADD COLUMN claim_expires_at TEXT;
`,
  },
  {
    id: 29,
    name: "a run's plan digest: a worker joining the run with another plan is refused",
    sql: `
-- The sha256 of the plan the run's tasks were last stored from (src/store/plan-digest.ts), recorded once
-- every task of the plan is stored, and how many tasks that plan has, recorded as its storing starts: a
-- worker of a fleet joining the run compares its own plan's with them, and waits for the digest of a plan
-- still being stored. A run from before has neither, and is joined as before.
ALTER TABLE runs ADD COLUMN plan_digest TEXT CHECK (plan_digest IS NULL OR length(plan_digest) = 64);
ALTER TABLE runs ADD COLUMN plan_tasks INTEGER CHECK (plan_tasks IS NULL OR plan_tasks >= 0);
`,
  },
  ...takenOnPostgres([30]),
  {
    id: 31,
    name: "a run's plan still being stored: its digest kept from the start, the rest stored by whoever remains",
    sql: `
-- 1 while the tasks of a run's plan are stored in the background (its digest and count recorded before the
-- first of them, so that a worker joining compares its own at once); 0 once every one is stored. NULL for
-- a run from before: there the digest itself says the plan is all stored.
ALTER TABLE runs ADD COLUMN plan_storing INTEGER CHECK (plan_storing IS NULL OR plan_storing IN (0, 1));
`,
  },
];
