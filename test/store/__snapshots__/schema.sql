CREATE TABLE migrations (
  id         INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  applied_at TEXT NOT NULL
) STRICT;

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
, first_started_at TEXT, active_ms INTEGER NOT NULL DEFAULT 0 CHECK (active_ms >= 0), api_base_url TEXT, key_fingerprint TEXT, report_basis TEXT, stop_reason TEXT, stop_message TEXT, stopped_at TEXT, plan_digest TEXT CHECK (plan_digest IS NULL OR length(plan_digest) = 64), plan_tasks INTEGER CHECK (plan_tasks IS NULL OR plan_tasks >= 0), plan_storing INTEGER CHECK (plan_storing IS NULL OR plan_storing IN (0, 1))) STRICT;

CREATE INDEX runs_by_manifest ON runs (manifest_path, created_at);

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
  img_uuid    TEXT, worker_id TEXT,
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
  at              TEXT NOT NULL, assumed INTEGER NOT NULL DEFAULT 0 CHECK (assumed IN (0, 1)), reroll INTEGER NOT NULL DEFAULT 0 CHECK (reroll IN (0, 1)), money_kind TEXT
  CHECK (money_kind IN ('first', 'retry', 'reroll', 'doubt_retry', 'sent_again')),
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
, claim_holder TEXT, claim_expires_at TEXT) STRICT;

CREATE TABLE task_counts (
  run_id TEXT NOT NULL,
  state  TEXT NOT NULL,
  n      INTEGER NOT NULL CHECK (n >= 0), est_micro INTEGER NOT NULL DEFAULT 0 CHECK (est_micro >= 0), est_min_micro INTEGER NOT NULL DEFAULT 0 CHECK (est_min_micro >= 0), est_max_micro INTEGER NOT NULL DEFAULT 0 CHECK (est_max_micro >= 0),
  PRIMARY KEY (run_id, state)
) STRICT, WITHOUT ROWID;

CREATE TABLE task_upstreams (
  run_id      TEXT NOT NULL,
  task_id     TEXT NOT NULL,
  name        TEXT NOT NULL,
  upstream_id TEXT NOT NULL,
  PRIMARY KEY (run_id, task_id, name),
  FOREIGN KEY (run_id, task_id) REFERENCES tasks (run_id, task_id)
) STRICT, WITHOUT ROWID;

CREATE INDEX task_upstreams_by_upstream ON task_upstreams (run_id, upstream_id);

CREATE TABLE uploads (
  storage     TEXT NOT NULL,
  key         TEXT NOT NULL,
  sha256      TEXT NOT NULL CHECK (length(sha256) = 64),
  bytes       INTEGER NOT NULL CHECK (bytes >= 0),
  uploaded_at TEXT NOT NULL,
  PRIMARY KEY (storage, key)
) STRICT, WITHOUT ROWID;

CREATE TABLE "tasks" (
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
  version          INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1), claimed_by TEXT,
  PRIMARY KEY (run_id, task_id)
) STRICT;

CREATE UNIQUE INDEX tasks_by_img_uuid ON tasks (img_uuid) WHERE img_uuid IS NOT NULL;

CREATE INDEX tasks_due_for_poll ON tasks (run_id, next_poll_at) WHERE state IN ('submitted', 'running', 'stalled');

CREATE INDEX tasks_ready_longest ON tasks (run_id, state, waits, expected_ms DESC, seq);

CREATE INDEX tasks_by_state ON tasks (run_id, state, seq, waits);

CREATE INDEX tasks_reviewed ON tasks (run_id, state, seq) WHERE review = 1;

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

CREATE TRIGGER task_review_version AFTER UPDATE OF state, verdict, attempt ON tasks
  WHEN NEW.review = 1 AND (OLD.state IS NOT NEW.state OR OLD.verdict IS NOT NEW.verdict OR OLD.attempt IS NOT NEW.attempt) BEGIN
  UPDATE tasks SET version = version + 1 WHERE run_id = NEW.run_id AND task_id = NEW.task_id;
END;

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

CREATE INDEX tasks_by_finished ON tasks (run_id, finished_at, task_id) WHERE finished_at IS NOT NULL;

CREATE TABLE run_money (
  run_id   TEXT PRIMARY KEY REFERENCES runs (id),
  budget   INTEGER CHECK (budget IS NULL OR budget >= 0),
  charged  INTEGER NOT NULL DEFAULT 0 CHECK (charged >= 0),
  refunded INTEGER NOT NULL DEFAULT 0 CHECK (refunded >= 0)
, period TEXT CHECK (period IS NULL OR period GLOB '[0-9][0-9][0-9][0-9]-[0-1][0-9]'), period_budget INTEGER CHECK (period_budget IS NULL OR period_budget >= 0)) STRICT;

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

CREATE UNIQUE INDEX reservations_open ON reservations (run_id, task_id) WHERE state IN ('held', 'doubt');

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

CREATE INDEX tasks_claimed ON tasks (run_id, claimed_by) WHERE claimed_by IS NOT NULL;

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

CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks BEGIN
  UPDATE task_counts SET n = n - 1,
    est_micro = est_micro - CAST(round(OLD.est_tokens * 1000000) AS INTEGER),
    est_min_micro = est_min_micro - CAST(round(OLD.est_min * 1000000) AS INTEGER),
    est_max_micro = est_max_micro - CAST(round(OLD.est_max * 1000000) AS INTEGER)
  WHERE run_id = OLD.run_id AND state = OLD.state;
END;

CREATE TABLE account_money (
  run_id   TEXT NOT NULL,
  kind     TEXT NOT NULL CHECK (kind IN ('first', 'retry', 'reroll', 'doubt_retry', 'sent_again')),
  jobs     INTEGER NOT NULL DEFAULT 0 CHECK (jobs >= 0),
  tasks    INTEGER NOT NULL DEFAULT 0 CHECK (tasks >= 0),
  charged  INTEGER NOT NULL DEFAULT 0 CHECK (charged >= 0),
  refunded INTEGER NOT NULL DEFAULT 0 CHECK (refunded >= 0),
  PRIMARY KEY (run_id, kind)
) STRICT, WITHOUT ROWID;

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

CREATE TABLE period_money (
  manifest_path TEXT NOT NULL,
  period        TEXT NOT NULL,
  charged       INTEGER NOT NULL DEFAULT 0 CHECK (charged >= 0),
  refunded      INTEGER NOT NULL DEFAULT 0 CHECK (refunded >= 0),
  PRIMARY KEY (manifest_path, period)
) STRICT;

CREATE TRIGGER period_money_ledger AFTER INSERT ON ledger BEGIN
  INSERT INTO period_money (manifest_path, period, charged, refunded)
    SELECT manifest_path, NEW.period,
      CASE WHEN NEW.kind = 'charge' THEN CAST(round(NEW.tokens * 1000000) AS INTEGER) ELSE 0 END,
      CASE WHEN NEW.kind = 'refund' THEN CAST(round(NEW.tokens * 1000000) AS INTEGER) ELSE 0 END
    FROM runs WHERE id = NEW.run_id
  ON CONFLICT (manifest_path, period) DO UPDATE SET
    charged = charged + excluded.charged, refunded = refunded + excluded.refunded;
END;
