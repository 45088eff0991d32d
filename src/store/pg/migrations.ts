// The schema of a PostgreSQL state: the same numbered migrations as SQLite's (src/store/migrations.ts),
// each written in PostgreSQL's dialect, so "schema 12" means the same tables, columns, indexes and
// triggers on either backend. APPEND ONLY, as there: a released migration is never edited.
//
// Differences kept on purpose: text compares byte by byte (COLLATE "C", as SQLite does), so ids sort the
// same; INTEGER is 64 bits (BIGINT) and REAL double precision, as in SQLite; the tables SQLite reads by
// rowid carry one as a column; a CHECK changes with ALTER TABLE where SQLite had to rebuild the table.

import type { Migration } from '../migrations.js';

/** SQLite's functions the store's statements use, defined in PostgreSQL under the same names. */
const COMPAT = `
CREATE FUNCTION json_valid(doc text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE STRICT AS $$
BEGIN
  PERFORM doc::json;
  RETURN true;
EXCEPTION WHEN others THEN
  RETURN false;
END $$;
-- Booleans read as 1 and 0, as SQLite's json_extract gives them.
CREATE FUNCTION json_extract(doc text, path text) RETURNS text LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT CASE jsonb_typeof(v) WHEN 'boolean' THEN CASE WHEN v = 'true'::jsonb THEN '1' ELSE '0' END
                              WHEN 'null' THEN NULL ELSE v #>> '{}' END
  FROM (SELECT doc::jsonb #> string_to_array(substr(path, 3), '.') AS v) AS x
$$;
CREATE FUNCTION json_type(doc text, path text) RETURNS text LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT CASE jsonb_typeof(v) WHEN 'string' THEN 'text' WHEN 'boolean' THEN v #>> '{}'
           WHEN 'number' THEN CASE WHEN v #>> '{}' ~ '^-?[0-9]+$' THEN 'integer' ELSE 'real' END
           ELSE jsonb_typeof(v) END
  FROM (SELECT doc::jsonb #> string_to_array(substr(path, 3), '.') AS v) AS x
$$;
CREATE FUNCTION json_each(doc text) RETURNS TABLE (value text) LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT jsonb_array_elements_text(doc::jsonb)
$$;
CREATE FUNCTION instr(haystack text, needle text) RETURNS bigint LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT strpos(haystack, needle)::bigint
$$;
CREATE FUNCTION julianday(at text) RETURNS double precision LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT extract(epoch FROM at::timestamptz)::double precision / 86400.0 + 2440587.5
$$;
-- SQLite's total(): a sum that is 0.0, never NULL, over no rows.
CREATE AGGREGATE total(double precision) (SFUNC = float8pl, STYPE = double precision, INITCOND = '0');
`;

const TASK_STATES_1 = `'pending', 'submitting', 'in_doubt', 'submitted', 'running', 'downloading', 'done', 'failed', 'rejected', 'blocked'`;
const TASK_STATES_2 = `'pending', 'submitting', 'in_doubt', 'submitted', 'running', 'stalled', 'downloading', 'unfetched', 'done', 'failed', 'rejected', 'blocked', 'lost'`;

/**
 * A table's CHECKs moved to its columns' types (migrations 25 and 26): for each column, its CHECK dropped and
 * the column given the domain that holds the same rule. A domain new in a migration has no rule yet when the
 * columns take it, so their table is not rewritten (tasks, the largest, is not); ALTER DOMAIN adds each rule
 * after, checking the rows already there. A column given a domain that has its rule already (migration 26's
 * flags and counts) has its table rewritten, each value checked.
 * A later rule (a new task state) is therefore a domain's: ALTER DOMAIN task_state DROP CONSTRAINT
 * task_state_check, then ADD CONSTRAINT with the new list; the table has no CHECK of that column left.
 */
function checksAsDomains(table: string, columns: readonly (readonly [string, string])[]): string {
  return columns
    .map(([column, domain]) => {
      const text = TEXT_DOMAINS.has(domain) ? ' COLLATE "C"' : '';
      return `ALTER TABLE ${table} DROP CONSTRAINT ${table}_${column}_check;
ALTER TABLE ${table} ALTER COLUMN ${column} TYPE ${domain}${text};`;
    })
    .join('\n');
}
const TEXT_DOMAINS = new Set([
  'task_state',
  'task_verdict',
  'job_source',
  'json_text',
  'attempt_outcome',
  'file_kind',
  'ledger_kind',
  'money_kind',
  'ledger_period',
  'reservation_state',
  'reservation_kind',
  'run_state',
  'decision_verdict',
  'sha256_hex',
]);

/**
 * Migration 21's counts move (one UPDATE of both rows, an INSERT only for a state the run has no row for yet);
 * `guard`: statements first, at the top of its body (migration 25 tests there the condition a WHEN held).
 */
function taskCountsMove(guard = ''): string {
  return `CREATE OR REPLACE FUNCTION task_counts_move() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  moved bigint := 0;
BEGIN
${guard}  PERFORM pg_advisory_xact_lock(hashtextextended('mediabatch counts ' || OLD.run_id, 0));
  IF OLD.run_id IS DISTINCT FROM NEW.run_id THEN
    UPDATE task_counts SET n = n - 1, est_micro = est_micro - micro(OLD.est_tokens),
      est_min_micro = est_min_micro - micro(OLD.est_min), est_max_micro = est_max_micro - micro(OLD.est_max)
    WHERE run_id = OLD.run_id AND state = OLD.state;
  ELSE
    UPDATE task_counts SET
      n = n + CASE WHEN state = NEW.state THEN 1 ELSE 0 END - CASE WHEN state = OLD.state THEN 1 ELSE 0 END,
      est_micro = est_micro + CASE WHEN state = NEW.state THEN micro(NEW.est_tokens) ELSE 0 END
        - CASE WHEN state = OLD.state THEN micro(OLD.est_tokens) ELSE 0 END,
      est_min_micro = est_min_micro + CASE WHEN state = NEW.state THEN micro(NEW.est_min) ELSE 0 END
        - CASE WHEN state = OLD.state THEN micro(OLD.est_min) ELSE 0 END,
      est_max_micro = est_max_micro + CASE WHEN state = NEW.state THEN micro(NEW.est_max) ELSE 0 END
        - CASE WHEN state = OLD.state THEN micro(OLD.est_max) ELSE 0 END
    WHERE run_id = NEW.run_id AND state IN (OLD.state, NEW.state);
    GET DIAGNOSTICS moved = ROW_COUNT;
  END IF;
  -- Fewer rows than states moved: the new state's row may be missing (the first task of the run to reach
  -- it). One moved already, as the old statements' INSERT … ON CONFLICT would have, is not added again.
  IF moved < (CASE WHEN OLD.state = NEW.state AND OLD.run_id = NEW.run_id THEN 1 ELSE 2 END) THEN
    INSERT INTO task_counts (run_id, state, n, est_micro, est_min_micro, est_max_micro)
      SELECT NEW.run_id, NEW.state, 1, micro(NEW.est_tokens), micro(NEW.est_min), micro(NEW.est_max)
      WHERE moved = 0 OR NOT EXISTS (SELECT 1 FROM task_counts WHERE run_id = NEW.run_id AND state = NEW.state)
      ON CONFLICT (run_id, state) DO UPDATE SET n = task_counts.n + 1,
        est_micro = task_counts.est_micro + excluded.est_micro,
        est_min_micro = task_counts.est_min_micro + excluded.est_min_micro,
        est_max_micro = task_counts.est_max_micro + excluded.est_max_micro;
  END IF;
  RETURN NULL;
END $$;`;
}

export const PG_MIGRATIONS: readonly Migration[] = [
  {
    id: 1,
    name: 'runs, tasks, attempts, job events, files, ledger, quota, leases, schedules',
    sql: `${COMPAT}
CREATE TABLE runs (
  id             TEXT COLLATE "C" PRIMARY KEY,
  manifest_path  TEXT COLLATE "C" NOT NULL,
  manifest_name  TEXT COLLATE "C" NOT NULL,
  state          TEXT COLLATE "C" NOT NULL CHECK (state IN ('running', 'interrupted', 'finished', 'refused')),
  exit_code      BIGINT,
  settings       TEXT COLLATE "C" NOT NULL CHECK (json_valid(settings)),
  callback_token TEXT COLLATE "C",
  balance_before DOUBLE PRECISION,
  balance_after  DOUBLE PRECISION,
  created_at     TEXT COLLATE "C" NOT NULL,
  started_at     TEXT COLLATE "C",
  finished_at    TEXT COLLATE "C"
);
CREATE INDEX runs_by_manifest ON runs (manifest_path, created_at);

CREATE TABLE tasks (
  rowid          BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
  run_id         TEXT COLLATE "C" NOT NULL REFERENCES runs (id),
  task_id        TEXT COLLATE "C" NOT NULL,
  seq            BIGINT NOT NULL,
  model          TEXT COLLATE "C" NOT NULL,
  endpoint       TEXT COLLATE "C" NOT NULL,
  body           TEXT COLLATE "C" NOT NULL,
  body_hash      TEXT COLLATE "C" NOT NULL,
  est_tokens     DOUBLE PRECISION NOT NULL,
  est_min        DOUBLE PRECISION NOT NULL,
  est_max        DOUBLE PRECISION NOT NULL,
  est_basis      TEXT COLLATE "C" NOT NULL,
  est_assumed    BIGINT NOT NULL CHECK (est_assumed IN (0, 1)),
  state          TEXT COLLATE "C" NOT NULL DEFAULT 'pending',
  img_uuid       TEXT COLLATE "C",
  cost           DOUBLE PRECISION,
  refunded       DOUBLE PRECISION,
  error          TEXT COLLATE "C",
  submitted_at   TEXT COLLATE "C",
  finished_at    TEXT COLLATE "C",
  job_status     TEXT COLLATE "C",
  job_duration   DOUBLE PRECISION,
  last_polled_at TEXT COLLATE "C",
  next_poll_at   TEXT COLLATE "C",
  poll_count     BIGINT NOT NULL DEFAULT 0,
  source         TEXT COLLATE "C" CHECK (source IN ('poll', 'callback')),
  updated_at     TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (run_id, task_id),
  CONSTRAINT tasks_state_check CHECK (state IN (${TASK_STATES_1}))
);
CREATE UNIQUE INDEX tasks_by_img_uuid ON tasks (img_uuid) WHERE img_uuid IS NOT NULL;
CREATE INDEX tasks_by_state ON tasks (run_id, state, seq);
CREATE INDEX tasks_due_for_poll ON tasks (run_id, next_poll_at) WHERE state IN ('submitted', 'running');

CREATE TABLE attempts (
  rowid       BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
  run_id      TEXT COLLATE "C" NOT NULL,
  task_id     TEXT COLLATE "C" NOT NULL,
  attempt_no  BIGINT NOT NULL CHECK (attempt_no >= 1),
  sent_at     TEXT COLLATE "C" NOT NULL,
  answered_at TEXT COLLATE "C",
  outcome     TEXT COLLATE "C" CHECK (outcome IN ('submitted', 'rejected', 'not_charged', 'in_doubt')),
  http_status BIGINT,
  code        BIGINT,
  message     TEXT COLLATE "C",
  img_uuid    TEXT COLLATE "C",
  PRIMARY KEY (run_id, task_id, attempt_no),
  FOREIGN KEY (run_id, task_id) REFERENCES tasks (run_id, task_id)
);

CREATE TABLE job_events (
  rowid    BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
  img_uuid TEXT COLLATE "C" NOT NULL,
  status   TEXT COLLATE "C" NOT NULL,
  at       TEXT COLLATE "C" NOT NULL,
  source   TEXT COLLATE "C" NOT NULL CHECK (source IN ('poll', 'callback')),
  record   TEXT COLLATE "C" CHECK (record IS NULL OR json_valid(record)),
  PRIMARY KEY (img_uuid, status)
);

CREATE TABLE files (
  rowid        BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
  run_id       TEXT COLLATE "C" NOT NULL,
  task_id      TEXT COLLATE "C" NOT NULL,
  idx          BIGINT NOT NULL CHECK (idx >= 0),
  kind         TEXT COLLATE "C" NOT NULL CHECK (kind IN ('image', 'audio', 'video', 'json')),
  path         TEXT COLLATE "C" NOT NULL,
  bytes        BIGINT NOT NULL CHECK (bytes >= 0),
  sha256       TEXT COLLATE "C" NOT NULL,
  source_host  TEXT COLLATE "C",
  completed_at TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (run_id, task_id, idx),
  FOREIGN KEY (run_id, task_id) REFERENCES tasks (run_id, task_id)
);

CREATE TABLE ledger (
  id              BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  key_fingerprint TEXT COLLATE "C" NOT NULL,
  period          TEXT COLLATE "C" NOT NULL CHECK (period ~ '^[0-9]{4}-[0-1][0-9]$'),
  run_id          TEXT COLLATE "C" NOT NULL REFERENCES runs (id),
  task_id         TEXT COLLATE "C" NOT NULL,
  img_uuid        TEXT COLLATE "C" NOT NULL,
  kind            TEXT COLLATE "C" NOT NULL CHECK (kind IN ('charge', 'refund')),
  tokens          DOUBLE PRECISION NOT NULL CHECK (tokens >= 0),
  at              TEXT COLLATE "C" NOT NULL,
  UNIQUE (img_uuid, kind)
);
CREATE INDEX ledger_by_key_period ON ledger (key_fingerprint, period);
CREATE INDEX ledger_by_run ON ledger (run_id, task_id);

CREATE TABLE quota (
  key_fingerprint TEXT COLLATE "C" PRIMARY KEY,
  used            DOUBLE PRECISION NOT NULL,
  quota           DOUBLE PRECISION NOT NULL,
  period          TEXT COLLATE "C" NOT NULL,
  learned_at      TEXT COLLATE "C" NOT NULL
);

CREATE TABLE leases (
  name         TEXT COLLATE "C" PRIMARY KEY,
  holder       TEXT COLLATE "C" NOT NULL,
  acquired_at  TEXT COLLATE "C" NOT NULL,
  heartbeat_at TEXT COLLATE "C" NOT NULL,
  expires_at   TEXT COLLATE "C" NOT NULL
);

CREATE TABLE schedules (
  manifest_path TEXT COLLATE "C" PRIMARY KEY,
  last_fired_at TEXT COLLATE "C",
  last_run_id   TEXT COLLATE "C",
  next_fire_at  TEXT COLLATE "C",
  updated_at    TEXT COLLATE "C" NOT NULL
);
`,
  },
  {
    id: 2,
    name: 'task states stalled, unfetched and lost; automatic retries; unknown costs; recovery from doubt',
    sql: `
ALTER TABLE tasks DROP CONSTRAINT tasks_state_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_state_check CHECK (state IN (${TASK_STATES_2}));
ALTER TABLE tasks ADD COLUMN retries BIGINT NOT NULL DEFAULT 0 CHECK (retries >= 0);
ALTER TABLE tasks ADD COLUMN cost_assumed BIGINT NOT NULL DEFAULT 0 CHECK (cost_assumed IN (0, 1));
ALTER TABLE tasks ADD COLUMN recovered BIGINT NOT NULL DEFAULT 0 CHECK (recovered IN (0, 1));
DROP INDEX tasks_due_for_poll;
CREATE INDEX tasks_due_for_poll ON tasks (run_id, next_poll_at) WHERE state IN ('submitted', 'running', 'stalled');
ALTER TABLE ledger ADD COLUMN assumed BIGINT NOT NULL DEFAULT 0 CHECK (assumed IN (0, 1));
`,
  },
  {
    id: 3,
    name: 'runs: first start, active time, and the API and key they belong to; tasks: file name',
    sql: `
ALTER TABLE runs ADD COLUMN first_started_at TEXT COLLATE "C";
UPDATE runs SET first_started_at = coalesce(started_at, created_at);
ALTER TABLE runs ADD COLUMN active_ms BIGINT NOT NULL DEFAULT 0 CHECK (active_ms >= 0);
ALTER TABLE runs ADD COLUMN api_base_url TEXT COLLATE "C";
ALTER TABLE runs ADD COLUMN key_fingerprint TEXT COLLATE "C";
ALTER TABLE tasks ADD COLUMN file_name TEXT COLLATE "C";
`,
  },
  {
    id: 4,
    name: 'tasks: expected job duration, so the longest go first',
    sql: `
ALTER TABLE tasks ADD COLUMN expected_ms BIGINT NOT NULL DEFAULT 0 CHECK (expected_ms >= 0);
CREATE INDEX tasks_pending_longest ON tasks (run_id, state, expected_ms DESC, seq);
`,
  },
  {
    id: 5,
    name: 'task_counts: tasks per run and state, kept by triggers, so progress never counts every task',
    sql: `
CREATE TABLE task_counts (
  run_id TEXT COLLATE "C" NOT NULL,
  state  TEXT COLLATE "C" NOT NULL,
  n      BIGINT NOT NULL CHECK (n >= 0),
  PRIMARY KEY (run_id, state)
);
INSERT INTO task_counts (run_id, state, n) SELECT run_id, state, count(*) FROM tasks GROUP BY run_id, state;

CREATE FUNCTION task_counts_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE task_counts SET n = n - 1 WHERE run_id = OLD.run_id AND state = OLD.state;
  INSERT INTO task_counts (run_id, state, n) VALUES (NEW.run_id, NEW.state, 1)
    ON CONFLICT (run_id, state) DO UPDATE SET n = task_counts.n + 1;
  RETURN NULL;
END $$;
CREATE TRIGGER task_counts_move AFTER UPDATE OF state ON tasks
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION task_counts_move();
CREATE FUNCTION task_counts_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE task_counts SET n = n - 1 WHERE run_id = OLD.run_id AND state = OLD.state;
  RETURN NULL;
END $$;
CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks FOR EACH ROW EXECUTE FUNCTION task_counts_delete();
`,
  },
  {
    id: 6,
    name: 'runs: what the report on disk was written from',
    sql: `
ALTER TABLE runs ADD COLUMN report_basis TEXT COLLATE "C";
`,
  },
  {
    id: 7,
    name: 'chains: the tasks a task waits for, and the request as planned before its references are filled in',
    sql: `
CREATE TABLE task_upstreams (
  run_id      TEXT COLLATE "C" NOT NULL,
  task_id     TEXT COLLATE "C" NOT NULL,
  name        TEXT COLLATE "C" NOT NULL,
  upstream_id TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (run_id, task_id, name),
  FOREIGN KEY (run_id, task_id) REFERENCES tasks (run_id, task_id)
);
CREATE INDEX task_upstreams_by_upstream ON task_upstreams (run_id, upstream_id);
ALTER TABLE tasks ADD COLUMN planned_body TEXT COLLATE "C";
ALTER TABLE tasks ADD COLUMN planned_estimate TEXT COLLATE "C" CHECK (planned_estimate IS NULL OR json_valid(planned_estimate));
`,
  },
  {
    id: 8,
    name: 'uploads: local input files already in a bucket, by content',
    sql: `
CREATE TABLE uploads (
  storage     TEXT COLLATE "C" NOT NULL,
  key         TEXT COLLATE "C" NOT NULL,
  sha256      TEXT COLLATE "C" NOT NULL CHECK (length(sha256) = 64),
  bytes       BIGINT NOT NULL CHECK (bytes >= 0),
  uploaded_at TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (storage, key)
);
`,
  },
  {
    id: 9,
    name: 'chains: how many upstreams each task still waits for, kept by triggers',
    sql: `
ALTER TABLE tasks ADD COLUMN waits BIGINT NOT NULL DEFAULT 0 CHECK (waits >= 0);
UPDATE tasks SET waits = (
  SELECT count(*) FROM task_upstreams u
  WHERE u.run_id = tasks.run_id AND u.task_id = tasks.task_id
    AND (SELECT up.state FROM tasks up WHERE up.run_id = u.run_id AND up.task_id = u.upstream_id) IS DISTINCT FROM 'done')
WHERE EXISTS (SELECT 1 FROM task_upstreams u WHERE u.run_id = tasks.run_id AND u.task_id = tasks.task_id);
DROP INDEX tasks_pending_longest;
CREATE INDEX tasks_ready_longest ON tasks (run_id, state, waits, expected_ms DESC, seq);
DROP INDEX tasks_by_state;
CREATE INDEX tasks_by_state ON tasks (run_id, state, seq, waits);

CREATE FUNCTION task_upstreams_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE tasks SET waits = waits + 1 WHERE run_id = NEW.run_id AND task_id = NEW.task_id
    AND (SELECT state FROM tasks WHERE run_id = NEW.run_id AND task_id = NEW.upstream_id) IS DISTINCT FROM 'done';
  RETURN NULL;
END $$;
CREATE TRIGGER task_upstreams_add AFTER INSERT ON task_upstreams FOR EACH ROW EXECUTE FUNCTION task_upstreams_add();
CREATE FUNCTION task_upstreams_remove() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE tasks SET waits = waits - 1 WHERE run_id = OLD.run_id AND task_id = OLD.task_id
    AND (SELECT state FROM tasks WHERE run_id = OLD.run_id AND task_id = OLD.upstream_id) IS DISTINCT FROM 'done';
  RETURN NULL;
END $$;
CREATE TRIGGER task_upstreams_remove AFTER DELETE ON task_upstreams FOR EACH ROW EXECUTE FUNCTION task_upstreams_remove();
CREATE FUNCTION task_upstream_done() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE tasks SET waits = waits - 1 WHERE run_id = NEW.run_id
    AND task_id IN (SELECT task_id FROM task_upstreams WHERE run_id = NEW.run_id AND upstream_id = NEW.task_id);
  RETURN NULL;
END $$;
CREATE TRIGGER task_upstream_done AFTER UPDATE OF state ON tasks FOR EACH ROW
  WHEN (NEW.state = 'done' AND OLD.state IS DISTINCT FROM 'done') EXECUTE FUNCTION task_upstream_done();
CREATE FUNCTION task_upstream_undone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE tasks SET waits = waits + 1 WHERE run_id = NEW.run_id
    AND task_id IN (SELECT task_id FROM task_upstreams WHERE run_id = NEW.run_id AND upstream_id = NEW.task_id);
  RETURN NULL;
END $$;
CREATE TRIGGER task_upstream_undone AFTER UPDATE OF state ON tasks FOR EACH ROW
  WHEN (OLD.state = 'done' AND NEW.state IS DISTINCT FROM 'done') EXECUTE FUNCTION task_upstream_undone();
`,
  },
  {
    id: 10,
    name: 'view: finished tasks by time, for the newest results first',
    sql: `
CREATE INDEX tasks_by_finished ON tasks (run_id, finished_at, task_id) WHERE finished_at IS NOT NULL;
`,
  },
  {
    id: 11,
    name: 'review: decisions, the states skipped, reviewed tasks, attempts of a task, and waits that need approval',
    sql: `
ALTER TABLE tasks DROP CONSTRAINT tasks_state_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_state_check CHECK (state IN (${TASK_STATES_2}, 'skipped'));
ALTER TABLE tasks ADD COLUMN review BIGINT NOT NULL DEFAULT 0 CHECK (review IN (0, 1));
ALTER TABLE tasks ADD COLUMN verdict TEXT COLLATE "C" CHECK (verdict IN ('approved', 'rejected'));
ALTER TABLE tasks ADD COLUMN attempt BIGINT NOT NULL DEFAULT 1 CHECK (attempt >= 1);
ALTER TABLE tasks ADD COLUMN version BIGINT NOT NULL DEFAULT 1 CHECK (version >= 1);
CREATE INDEX tasks_reviewed ON tasks (run_id, state, seq) WHERE review = 1;

-- A result gives itself to its downstreams when done, and approved if it is reviewed.
CREATE FUNCTION task_gives_result(s text, review bigint, verdict text) RETURNS boolean
  LANGUAGE sql IMMUTABLE AS $$ SELECT coalesce(s = 'done' AND (review = 0 OR verdict IS NOT DISTINCT FROM 'approved'), false) $$;

CREATE OR REPLACE FUNCTION task_upstreams_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE tasks SET waits = waits + 1 WHERE run_id = NEW.run_id AND task_id = NEW.task_id
    AND NOT coalesce((SELECT task_gives_result(state, review, verdict) FROM tasks
                      WHERE run_id = NEW.run_id AND task_id = NEW.upstream_id), false);
  RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION task_upstreams_remove() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE tasks SET waits = waits - 1 WHERE run_id = OLD.run_id AND task_id = OLD.task_id
    AND NOT coalesce((SELECT task_gives_result(state, review, verdict) FROM tasks
                      WHERE run_id = OLD.run_id AND task_id = OLD.upstream_id), false);
  RETURN NULL;
END $$;
DROP TRIGGER task_upstream_done ON tasks;
DROP TRIGGER task_upstream_undone ON tasks;
CREATE TRIGGER task_upstream_done AFTER UPDATE OF state, review, verdict ON tasks FOR EACH ROW
  WHEN (task_gives_result(NEW.state, NEW.review, NEW.verdict) AND NOT task_gives_result(OLD.state, OLD.review, OLD.verdict))
  EXECUTE FUNCTION task_upstream_done();
CREATE TRIGGER task_upstream_undone AFTER UPDATE OF state, review, verdict ON tasks FOR EACH ROW
  WHEN (task_gives_result(OLD.state, OLD.review, OLD.verdict) AND NOT task_gives_result(NEW.state, NEW.review, NEW.verdict))
  EXECUTE FUNCTION task_upstream_undone();

CREATE FUNCTION task_review_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE tasks SET version = version + 1 WHERE run_id = NEW.run_id AND task_id = NEW.task_id;
  RETURN NULL;
END $$;
CREATE TRIGGER task_review_version AFTER UPDATE OF state, verdict, attempt ON tasks FOR EACH ROW
  WHEN (NEW.review = 1 AND (OLD.state IS DISTINCT FROM NEW.state OR OLD.verdict IS DISTINCT FROM NEW.verdict
        OR OLD.attempt IS DISTINCT FROM NEW.attempt))
  EXECUTE FUNCTION task_review_version();

CREATE TABLE decisions (
  id         BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  run_id     TEXT COLLATE "C" NOT NULL,
  task_id    TEXT COLLATE "C" NOT NULL,
  attempt    BIGINT NOT NULL CHECK (attempt >= 1),
  verdict    TEXT COLLATE "C" NOT NULL CHECK (verdict IN ('approve', 'reject', 'reroll')),
  note       TEXT COLLATE "C",
  decided_by TEXT COLLATE "C" NOT NULL,
  decided_at TEXT COLLATE "C" NOT NULL,
  version    BIGINT NOT NULL,
  FOREIGN KEY (run_id, task_id) REFERENCES tasks (run_id, task_id)
);
CREATE INDEX decisions_by_task ON decisions (run_id, task_id, id);

ALTER TABLE ledger ADD COLUMN reroll BIGINT NOT NULL DEFAULT 0 CHECK (reroll IN (0, 1));
`,
  },
  {
    id: 12,
    name: "view: the index of finished tasks again, after review's rebuild of tasks",
    sql: `
-- PostgreSQL altered the table in place, so the index of migration 10 is still there.
CREATE INDEX IF NOT EXISTS tasks_by_finished ON tasks (run_id, finished_at, task_id) WHERE finished_at IS NOT NULL;
`,
  },
  {
    id: 13,
    name: 'money in the store: run budgets, ledger totals per run, reservations of worst cases',
    sql: `
-- Tokens to micro-tokens as the store's money module does (Math.round: halves up), where PostgreSQL's
-- round() of a double breaks ties to even.
CREATE FUNCTION micro(tokens double precision) RETURNS bigint LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT floor(tokens * 1000000 + 0.5)::bigint
$$;
-- A run's budget from its settings, in micro-tokens: a positive number, else none. json_extract is text
-- here; the nested CASE casts it only once json_type has said it is a number.
CREATE FUNCTION settings_budget(settings text) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN json_type(settings, '$.budget') IN ('integer', 'real') THEN
    CASE WHEN json_extract(settings, '$.budget')::double precision > 0
      THEN micro(json_extract(settings, '$.budget')::double precision) END END
$$;

CREATE TABLE run_money (
  run_id   TEXT COLLATE "C" PRIMARY KEY REFERENCES runs (id),
  budget   BIGINT CHECK (budget IS NULL OR budget >= 0),
  charged  BIGINT NOT NULL DEFAULT 0 CHECK (charged >= 0),
  refunded BIGINT NOT NULL DEFAULT 0 CHECK (refunded >= 0)
);
INSERT INTO run_money (run_id, budget, charged, refunded)
  SELECT r.id, settings_budget(r.settings),
    coalesce((SELECT sum(micro(l.tokens)) FROM ledger l WHERE l.run_id = r.id AND l.kind = 'charge'), 0),
    coalesce((SELECT sum(micro(l.tokens)) FROM ledger l WHERE l.run_id = r.id AND l.kind = 'refund'), 0)
  FROM runs r;
CREATE FUNCTION run_money_created() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO run_money (run_id, budget) VALUES (NEW.id, settings_budget(NEW.settings))
    ON CONFLICT (run_id) DO NOTHING;
  RETURN NULL;
END $$;
CREATE TRIGGER run_money_created AFTER INSERT ON runs FOR EACH ROW EXECUTE FUNCTION run_money_created();
CREATE FUNCTION run_money_settings() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE run_money SET budget = settings_budget(NEW.settings) WHERE run_id = NEW.id;
  RETURN NULL;
END $$;
CREATE TRIGGER run_money_settings AFTER UPDATE OF settings ON runs FOR EACH ROW EXECUTE FUNCTION run_money_settings();
CREATE FUNCTION run_money_ledger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO run_money (run_id) VALUES (NEW.run_id) ON CONFLICT (run_id) DO NOTHING;
  UPDATE run_money SET
    charged = charged + CASE WHEN NEW.kind = 'charge' THEN micro(NEW.tokens) ELSE 0 END,
    refunded = refunded + CASE WHEN NEW.kind = 'refund' THEN micro(NEW.tokens) ELSE 0 END
  WHERE run_id = NEW.run_id;
  RETURN NULL;
END $$;
CREATE TRIGGER run_money_ledger AFTER INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION run_money_ledger();

CREATE TABLE reservations (
  id          BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  run_id      TEXT COLLATE "C" NOT NULL REFERENCES runs (id),
  task_id     TEXT COLLATE "C" NOT NULL,
  kind        TEXT COLLATE "C" NOT NULL CHECK (kind IN ('first', 'retry', 'reroll', 'doubt')),
  amount      BIGINT NOT NULL CHECK (amount >= 0),
  state       TEXT COLLATE "C" NOT NULL CHECK (state IN ('held', 'doubt', 'settled', 'released')),
  charged     BIGINT CHECK (charged IS NULL OR charged >= 0),
  reserved_at TEXT COLLATE "C" NOT NULL,
  closed_at   TEXT COLLATE "C",
  FOREIGN KEY (run_id, task_id) REFERENCES tasks (run_id, task_id)
);
CREATE UNIQUE INDEX reservations_open ON reservations (run_id, task_id) WHERE state IN ('held', 'doubt');
CREATE FUNCTION reservations_unsent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE reservations SET state = 'released', closed_at = NEW.updated_at
  WHERE run_id = NEW.run_id AND task_id = NEW.task_id AND state IN ('held', 'doubt') AND state = 'held';
  RETURN NULL;
END $$;
CREATE TRIGGER reservations_unsent AFTER UPDATE OF state ON tasks FOR EACH ROW
  WHEN (OLD.state = 'pending' AND NEW.state NOT IN ('pending', 'submitting'))
  EXECUTE FUNCTION reservations_unsent();
CREATE FUNCTION reservations_requeued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE reservations SET state = 'released', closed_at = NEW.updated_at
  WHERE run_id = NEW.run_id AND task_id = NEW.task_id AND state IN ('held', 'doubt') AND state = 'doubt';
  RETURN NULL;
END $$;
CREATE TRIGGER reservations_requeued AFTER UPDATE OF state ON tasks FOR EACH ROW
  WHEN (OLD.state = 'in_doubt' AND NEW.state = 'pending')
  EXECUTE FUNCTION reservations_requeued();
INSERT INTO reservations (run_id, task_id, kind, amount, state, reserved_at)
  SELECT run_id, task_id, 'first', micro(est_max), 'doubt', updated_at
  FROM tasks WHERE state IN ('in_doubt', 'submitting');
INSERT INTO reservations (run_id, task_id, kind, amount, state, reserved_at)
  SELECT run_id, task_id, 'reroll', micro(est_max), 'held', updated_at
  FROM tasks WHERE review = 1 AND attempt > 1 AND state = 'pending';
`,
  },
  {
    id: 14,
    name: 'workers of a run, tasks claimed by a worker, attempts sent by one',
    sql: `
CREATE TABLE workers (
  run_id       TEXT COLLATE "C" NOT NULL REFERENCES runs (id),
  worker_id    TEXT COLLATE "C" NOT NULL,
  host         TEXT COLLATE "C" NOT NULL,
  pid          BIGINT NOT NULL,
  started_at   TEXT COLLATE "C" NOT NULL,
  heartbeat_at TEXT COLLATE "C" NOT NULL,
  expires_at   TEXT COLLATE "C" NOT NULL,
  stopped_at   TEXT COLLATE "C",
  lost_at      TEXT COLLATE "C",
  in_flight    BIGINT NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
  submitted    BIGINT NOT NULL DEFAULT 0 CHECK (submitted >= 0),
  PRIMARY KEY (run_id, worker_id)
);
ALTER TABLE tasks ADD COLUMN claimed_by TEXT COLLATE "C";
CREATE INDEX tasks_claimed ON tasks (run_id, claimed_by) WHERE claimed_by IS NOT NULL;
ALTER TABLE attempts ADD COLUMN worker_id TEXT COLLATE "C";
`,
  },
  {
    id: 15,
    name: "the account's sums per run, kept by triggers: estimates per state, money per kind of job",
    sql: `
ALTER TABLE task_counts ADD COLUMN est_micro BIGINT NOT NULL DEFAULT 0 CHECK (est_micro >= 0);
ALTER TABLE task_counts ADD COLUMN est_min_micro BIGINT NOT NULL DEFAULT 0 CHECK (est_min_micro >= 0);
ALTER TABLE task_counts ADD COLUMN est_max_micro BIGINT NOT NULL DEFAULT 0 CHECK (est_max_micro >= 0);
UPDATE task_counts SET est_micro = s.est, est_min_micro = s.est_min, est_max_micro = s.est_max
FROM (SELECT run_id, state, sum(micro(est_tokens)) AS est, sum(micro(est_min)) AS est_min,
        sum(micro(est_max)) AS est_max
      FROM tasks GROUP BY run_id, state) AS s
WHERE task_counts.run_id = s.run_id AND task_counts.state = s.state;
CREATE OR REPLACE FUNCTION task_counts_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE task_counts SET n = n - 1, est_micro = est_micro - micro(OLD.est_tokens),
    est_min_micro = est_min_micro - micro(OLD.est_min), est_max_micro = est_max_micro - micro(OLD.est_max)
  WHERE run_id = OLD.run_id AND state = OLD.state;
  INSERT INTO task_counts (run_id, state, n, est_micro, est_min_micro, est_max_micro)
    VALUES (NEW.run_id, NEW.state, 1, micro(NEW.est_tokens), micro(NEW.est_min), micro(NEW.est_max))
    ON CONFLICT (run_id, state) DO UPDATE SET n = task_counts.n + 1,
      est_micro = task_counts.est_micro + excluded.est_micro,
      est_min_micro = task_counts.est_min_micro + excluded.est_min_micro,
      est_max_micro = task_counts.est_max_micro + excluded.est_max_micro;
  RETURN NULL;
END $$;
DROP TRIGGER task_counts_move ON tasks;
CREATE TRIGGER task_counts_move AFTER UPDATE OF state, est_tokens, est_min, est_max ON tasks FOR EACH ROW
  WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.est_tokens IS DISTINCT FROM NEW.est_tokens
    OR OLD.est_min IS DISTINCT FROM NEW.est_min OR OLD.est_max IS DISTINCT FROM NEW.est_max)
  EXECUTE FUNCTION task_counts_move();
CREATE OR REPLACE FUNCTION task_counts_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE task_counts SET n = n - 1, est_micro = est_micro - micro(OLD.est_tokens),
    est_min_micro = est_min_micro - micro(OLD.est_min), est_max_micro = est_max_micro - micro(OLD.est_max)
  WHERE run_id = OLD.run_id AND state = OLD.state;
  RETURN NULL;
END $$;

-- A charge's kind of job, decided as SQLite's trigger does (see there); set before the row is written.
CREATE FUNCTION ledger_money_kind(l_run text, l_task text, l_img text) RETURNS text LANGUAGE sql STABLE AS $$
  SELECT coalesce((
    SELECT CASE WHEN b.outcome = 'in_doubt' THEN 'doubt_retry'
      WHEN EXISTS (SELECT 1 FROM ledger r WHERE r.img_uuid = b.img_uuid AND r.kind = 'refund') THEN 'retry'
      ELSE 'sent_again' END
    FROM attempts b
    WHERE b.run_id = l_run AND b.task_id = l_task AND b.outcome IN ('in_doubt', 'submitted')
      AND b.attempt_no < coalesce(
        (SELECT o.attempt_no FROM attempts o WHERE o.run_id = l_run AND o.task_id = l_task AND o.img_uuid = l_img),
        (SELECT max(o.attempt_no) FROM attempts o
           WHERE o.run_id = l_run AND o.task_id = l_task AND o.outcome IS NULL),
          (SELECT max(o.attempt_no) FROM attempts o
           WHERE o.run_id = l_run AND o.task_id = l_task AND o.outcome = 'in_doubt'),
          (SELECT max(o.attempt_no) FROM attempts o WHERE o.run_id = l_run AND o.task_id = l_task), 0)
    ORDER BY b.attempt_no DESC LIMIT 1), 'first')
$$;
ALTER TABLE ledger ADD COLUMN money_kind TEXT COLLATE "C"
  CHECK (money_kind IN ('first', 'retry', 'reroll', 'doubt_retry', 'sent_again'));
UPDATE ledger SET money_kind = CASE WHEN reroll = 1 THEN 'reroll'
  ELSE ledger_money_kind(run_id, task_id, img_uuid) END
WHERE kind = 'charge';
UPDATE ledger SET money_kind = coalesce((SELECT c.money_kind FROM ledger c
  WHERE c.img_uuid = ledger.img_uuid AND c.kind = 'charge'), 'first')
WHERE kind = 'refund';

CREATE TABLE account_money (
  run_id   TEXT COLLATE "C" NOT NULL,
  kind     TEXT COLLATE "C" NOT NULL CHECK (kind IN ('first', 'retry', 'reroll', 'doubt_retry', 'sent_again')),
  jobs     BIGINT NOT NULL DEFAULT 0 CHECK (jobs >= 0),
  tasks    BIGINT NOT NULL DEFAULT 0 CHECK (tasks >= 0),
  charged  BIGINT NOT NULL DEFAULT 0 CHECK (charged >= 0),
  refunded BIGINT NOT NULL DEFAULT 0 CHECK (refunded >= 0),
  PRIMARY KEY (run_id, kind)
);
INSERT INTO account_money (run_id, kind, jobs, tasks, charged, refunded)
  SELECT run_id, money_kind, count(CASE WHEN kind = 'charge' THEN 1 END),
    count(DISTINCT CASE WHEN kind = 'charge' THEN task_id END),
    coalesce(sum(CASE WHEN kind = 'charge' THEN micro(tokens) END), 0),
    coalesce(sum(CASE WHEN kind = 'refund' THEN micro(tokens) END), 0)
  FROM ledger GROUP BY run_id, money_kind;

CREATE FUNCTION account_money_kind() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' AND TG_WHEN = 'BEFORE' THEN
    NEW.money_kind := CASE
      WHEN NEW.kind = 'refund' THEN coalesce((SELECT c.money_kind FROM ledger c
        WHERE c.img_uuid = NEW.img_uuid AND c.kind = 'charge'), 'first')
      WHEN NEW.reroll = 1 THEN 'reroll'
      ELSE ledger_money_kind(NEW.run_id, NEW.task_id, NEW.img_uuid) END;
    RETURN NEW;
  END IF;
  INSERT INTO account_money (run_id, kind, jobs, tasks, charged, refunded)
    VALUES (NEW.run_id, NEW.money_kind, CASE WHEN NEW.kind = 'charge' THEN 1 ELSE 0 END,
      CASE WHEN NEW.kind = 'charge' AND NOT EXISTS (SELECT 1 FROM ledger o WHERE o.run_id = NEW.run_id
        AND o.task_id = NEW.task_id AND o.kind = 'charge' AND o.money_kind = NEW.money_kind AND o.id <> NEW.id)
        THEN 1 ELSE 0 END,
      CASE WHEN NEW.kind = 'charge' THEN micro(NEW.tokens) ELSE 0 END,
      CASE WHEN NEW.kind = 'refund' THEN micro(NEW.tokens) ELSE 0 END)
    ON CONFLICT (run_id, kind) DO UPDATE SET jobs = account_money.jobs + excluded.jobs,
      tasks = account_money.tasks + excluded.tasks, charged = account_money.charged + excluded.charged,
      refunded = account_money.refunded + excluded.refunded;
  RETURN NULL;
END $$;
-- The kind is set before the row is written (a charge that meets ON CONFLICT DO NOTHING adds nothing);
-- the sums after it, as SQLite's one trigger does.
CREATE TRIGGER account_money_kind BEFORE INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION account_money_kind();
CREATE TRIGGER account_money_sums AFTER INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION account_money_kind();
`,
  },
  {
    id: 16,
    name: "a schedule's period budget in the store: the period a fired run spends from, ledger totals per manifest and period",
    sql: `
ALTER TABLE run_money ADD COLUMN period TEXT COLLATE "C" CHECK (period IS NULL OR period ~ '^[0-9]{4}-[0-1][0-9]$');
ALTER TABLE run_money ADD COLUMN period_budget BIGINT CHECK (period_budget IS NULL OR period_budget >= 0);
CREATE TABLE period_money (
  manifest_path TEXT COLLATE "C" NOT NULL,
  period        TEXT COLLATE "C" NOT NULL,
  charged       BIGINT NOT NULL DEFAULT 0 CHECK (charged >= 0),
  refunded      BIGINT NOT NULL DEFAULT 0 CHECK (refunded >= 0),
  PRIMARY KEY (manifest_path, period)
);
INSERT INTO period_money (manifest_path, period, charged, refunded)
  SELECT r.manifest_path, l.period,
    coalesce(sum(CASE WHEN l.kind = 'charge' THEN micro(l.tokens) END), 0),
    coalesce(sum(CASE WHEN l.kind = 'refund' THEN micro(l.tokens) END), 0)
  FROM ledger l JOIN runs r ON r.id = l.run_id GROUP BY r.manifest_path, l.period;
CREATE FUNCTION period_money_ledger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO period_money (manifest_path, period, charged, refunded)
    SELECT manifest_path, NEW.period,
      CASE WHEN NEW.kind = 'charge' THEN micro(NEW.tokens) ELSE 0 END,
      CASE WHEN NEW.kind = 'refund' THEN micro(NEW.tokens) ELSE 0 END
    FROM runs WHERE id = NEW.run_id
  ON CONFLICT (manifest_path, period) DO UPDATE SET
    charged = period_money.charged + excluded.charged, refunded = period_money.refunded + excluded.refunded;
  RETURN NULL;
END $$;
CREATE TRIGGER period_money_ledger AFTER INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION period_money_ledger();
`,
  },
  {
    id: 17,
    name: "chains: the waits of a new run's links counted once per statement, not once per link",
    sql: `
-- A new run's links arrive ten thousand at a time (COPY, src/store/pg/bulk.ts): the trigger per link ran an
-- UPDATE of its task for each (about twice the server's work of the whole statement). Once per statement,
-- over the rows it inserted, it adds to each task the links whose upstream gives it no result yet: the
-- same count, as the upstreams' states do not change within the statement.
CREATE FUNCTION task_upstreams_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE tasks SET waits = tasks.waits + a.n
  FROM (SELECT u.run_id, u.task_id, count(*) AS n FROM added u
        WHERE NOT coalesce((SELECT task_gives_result(up.state, up.review, up.verdict) FROM tasks up
                            WHERE up.run_id = u.run_id AND up.task_id = u.upstream_id), false)
        GROUP BY u.run_id, u.task_id) AS a
  WHERE tasks.run_id = a.run_id AND tasks.task_id = a.task_id;
  RETURN NULL;
END $$;
DROP TRIGGER task_upstreams_add ON task_upstreams;
CREATE TRIGGER task_upstreams_add AFTER INSERT ON task_upstreams REFERENCING NEW TABLE AS added
  FOR EACH STATEMENT EXECUTE FUNCTION task_upstreams_added();
DROP FUNCTION task_upstreams_add();
`,
  },
  {
    id: 18,
    name: 'why a run stopped: its reason, its line and when, kept with the run until it starts again',
    sql: `
ALTER TABLE runs ADD COLUMN stop_reason TEXT COLLATE "C";
ALTER TABLE runs ADD COLUMN stop_message TEXT;
ALTER TABLE runs ADD COLUMN stopped_at TEXT COLLATE "C";
`,
  },
  {
    // PostgreSQL only: SQLite has one writer and nothing to wait for.
    id: 19,
    name: "a run's task counts moved when its transaction commits, one transaction at a time per run",
    sql: `
-- Every task that changes state moves two rows of task_counts (its old state's and its new one's). Done at
-- once, each worker's transaction would hold those rows from its first move to its commit, and two workers
-- moving tasks in opposite directions (one sends a task, another puts one back) would wait for each other
-- forever until the server undoes one. Deferred to the commit, the moves of a run are made under one lock
-- per run, held for the commit alone: the counts are the same, and no transaction waits on them while its
-- worker is still working.
CREATE OR REPLACE FUNCTION task_counts_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('mediabatch counts ' || OLD.run_id, 0));
  UPDATE task_counts SET n = n - 1, est_micro = est_micro - micro(OLD.est_tokens),
    est_min_micro = est_min_micro - micro(OLD.est_min), est_max_micro = est_max_micro - micro(OLD.est_max)
  WHERE run_id = OLD.run_id AND state = OLD.state;
  INSERT INTO task_counts (run_id, state, n, est_micro, est_min_micro, est_max_micro)
    VALUES (NEW.run_id, NEW.state, 1, micro(NEW.est_tokens), micro(NEW.est_min), micro(NEW.est_max))
    ON CONFLICT (run_id, state) DO UPDATE SET n = task_counts.n + 1,
      est_micro = task_counts.est_micro + excluded.est_micro,
      est_min_micro = task_counts.est_min_micro + excluded.est_min_micro,
      est_max_micro = task_counts.est_max_micro + excluded.est_max_micro;
  RETURN NULL;
END $$;
DROP TRIGGER task_counts_move ON tasks;
CREATE CONSTRAINT TRIGGER task_counts_move AFTER UPDATE OF state, est_tokens, est_min, est_max ON tasks
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.est_tokens IS DISTINCT FROM NEW.est_tokens
    OR OLD.est_min IS DISTINCT FROM NEW.est_min OR OLD.est_max IS DISTINCT FROM NEW.est_max)
  EXECUTE FUNCTION task_counts_move();
CREATE OR REPLACE FUNCTION task_counts_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('mediabatch counts ' || OLD.run_id, 0));
  UPDATE task_counts SET n = n - 1, est_micro = est_micro - micro(OLD.est_tokens),
    est_min_micro = est_min_micro - micro(OLD.est_min), est_max_micro = est_max_micro - micro(OLD.est_max)
  WHERE run_id = OLD.run_id AND state = OLD.state;
  RETURN NULL;
END $$;
DROP TRIGGER task_counts_delete ON tasks;
CREATE CONSTRAINT TRIGGER task_counts_delete AFTER DELETE ON tasks
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION task_counts_delete();
`,
  },
  {
    // PostgreSQL only: the same answers, planned once per session instead of once per statement.
    id: 20,
    name: "the functions every task's statements call, planned once per session",
    sql: `
-- A SQL function that is not inlined is planned again each time a statement calls it. ledger_money_kind,
-- called by the trigger of every charge, is: as PL/pgSQL its query is planned once per session (about half
-- of the server's work of a charge's INSERT went to planning it). Same query, same answer.
CREATE OR REPLACE FUNCTION ledger_money_kind(l_run text, l_task text, l_img text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN coalesce((
    SELECT CASE WHEN b.outcome = 'in_doubt' THEN 'doubt_retry'
      WHEN EXISTS (SELECT 1 FROM ledger r WHERE r.img_uuid = b.img_uuid AND r.kind = 'refund') THEN 'retry'
      ELSE 'sent_again' END
    FROM attempts b
    WHERE b.run_id = l_run AND b.task_id = l_task AND b.outcome IN ('in_doubt', 'submitted')
      AND b.attempt_no < coalesce(
        (SELECT o.attempt_no FROM attempts o WHERE o.run_id = l_run AND o.task_id = l_task AND o.img_uuid = l_img),
        (SELECT max(o.attempt_no) FROM attempts o
           WHERE o.run_id = l_run AND o.task_id = l_task AND o.outcome IS NULL),
          (SELECT max(o.attempt_no) FROM attempts o
           WHERE o.run_id = l_run AND o.task_id = l_task AND o.outcome = 'in_doubt'),
          (SELECT max(o.attempt_no) FROM attempts o WHERE o.run_id = l_run AND o.task_id = l_task), 0)
    ORDER BY b.attempt_no DESC LIMIT 1), 'first');
END $$;
-- json_each (the store's lists of states and ids) was STRICT, which keeps PostgreSQL from inlining a
-- set-returning SQL function into the statement: each call ran it as a function of its own, planned anew.
-- Without STRICT it is inlined; a NULL list still gives no rows (jsonb_array_elements_text is strict).
CREATE OR REPLACE FUNCTION json_each(doc text) RETURNS TABLE (value text) LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_array_elements_text(doc::jsonb)
$$;
`,
  },
  {
    // PostgreSQL only: the same rows and refusals, less of the server's work per task.
    id: 21,
    name: "the triggers of every task's moves and charges, cheaper to run",
    sql: `
-- A task's move (four per task) is counted when its transaction commits (migration 19): one statement for
-- both rows of task_counts where there were two, the old state's and the new one's moved together, and an
-- INSERT only for a state the run has no row for yet. The same counts (the deltas of both statements,
-- summed per row), under the same lock.
${taskCountsMove()}

-- A task done (or no longer done) fired a trigger whose condition called task_gives_result twice, a function
-- call per row of every move of state; spelt out, it is an expression (the same: state and review are never
-- NULL). Its UPDATE of the downstreams runs only when the task has some (a run without chains has none).
CREATE OR REPLACE FUNCTION task_upstream_done() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM task_upstreams WHERE run_id = NEW.run_id AND upstream_id = NEW.task_id) THEN
    UPDATE tasks SET waits = waits - 1 WHERE run_id = NEW.run_id
      AND task_id IN (SELECT task_id FROM task_upstreams WHERE run_id = NEW.run_id AND upstream_id = NEW.task_id);
  END IF;
  RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION task_upstream_undone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM task_upstreams WHERE run_id = NEW.run_id AND upstream_id = NEW.task_id) THEN
    UPDATE tasks SET waits = waits + 1 WHERE run_id = NEW.run_id
      AND task_id IN (SELECT task_id FROM task_upstreams WHERE run_id = NEW.run_id AND upstream_id = NEW.task_id);
  END IF;
  RETURN NULL;
END $$;
DROP TRIGGER task_upstream_done ON tasks;
DROP TRIGGER task_upstream_undone ON tasks;
CREATE TRIGGER task_upstream_done AFTER UPDATE OF state, review, verdict ON tasks FOR EACH ROW
  WHEN (NEW.state = 'done' AND (NEW.review = 0 OR NEW.verdict IS NOT DISTINCT FROM 'approved')
    AND NOT (OLD.state = 'done' AND (OLD.review = 0 OR OLD.verdict IS NOT DISTINCT FROM 'approved')))
  EXECUTE FUNCTION task_upstream_done();
CREATE TRIGGER task_upstream_undone AFTER UPDATE OF state, review, verdict ON tasks FOR EACH ROW
  WHEN (OLD.state = 'done' AND (OLD.review = 0 OR OLD.verdict IS NOT DISTINCT FROM 'approved')
    AND NOT (NEW.state = 'done' AND (NEW.review = 0 OR NEW.verdict IS NOT DISTINCT FROM 'approved')))
  EXECUTE FUNCTION task_upstream_undone();

-- A charge ran four triggers (its kind, then the sums of account_money, period_money and run_money), each an
-- INSERT … ON CONFLICT, run_money's after an INSERT … ON CONFLICT DO NOTHING. Now its kind, then one trigger
-- for the sums: each row, present after the run's first charge, is UPDATEd, and inserted only when missing
-- (ON CONFLICT still adds, should another transaction insert it first). Same tables, same order, same sums.
-- A task sent once has no earlier attempt, so its charge is a first one without the query of its attempts.
CREATE FUNCTION ledger_money_kind_set() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.kind = 'refund' THEN
    NEW.money_kind := coalesce((SELECT c.money_kind FROM ledger c WHERE c.img_uuid = NEW.img_uuid AND c.kind = 'charge'),
      'first');
  ELSIF NEW.reroll = 1 THEN
    NEW.money_kind := 'reroll';
  ELSIF NOT EXISTS (SELECT 1 FROM attempts a
                    WHERE a.run_id = NEW.run_id AND a.task_id = NEW.task_id AND a.attempt_no > 1) THEN
    NEW.money_kind := 'first';
  ELSE
    NEW.money_kind := ledger_money_kind(NEW.run_id, NEW.task_id, NEW.img_uuid);
  END IF;
  RETURN NEW;
END $$;
CREATE FUNCTION ledger_sums() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  add_jobs bigint := CASE WHEN NEW.kind = 'charge' THEN 1 ELSE 0 END;
  add_tasks bigint := 0;
  add_charged bigint := CASE WHEN NEW.kind = 'charge' THEN micro(NEW.tokens) ELSE 0 END;
  add_refunded bigint := CASE WHEN NEW.kind = 'refund' THEN micro(NEW.tokens) ELSE 0 END;
BEGIN
  IF NEW.kind = 'charge' AND NOT EXISTS (SELECT 1 FROM ledger o WHERE o.run_id = NEW.run_id AND o.task_id = NEW.task_id
      AND o.kind = 'charge' AND o.money_kind = NEW.money_kind AND o.id <> NEW.id) THEN
    add_tasks := 1;
  END IF;
  UPDATE account_money SET jobs = jobs + add_jobs, tasks = tasks + add_tasks,
    charged = account_money.charged + add_charged, refunded = account_money.refunded + add_refunded
  WHERE run_id = NEW.run_id AND kind = NEW.money_kind;
  IF NOT FOUND THEN
    INSERT INTO account_money (run_id, kind, jobs, tasks, charged, refunded)
      VALUES (NEW.run_id, NEW.money_kind, add_jobs, add_tasks, add_charged, add_refunded)
      ON CONFLICT (run_id, kind) DO UPDATE SET jobs = account_money.jobs + excluded.jobs,
        tasks = account_money.tasks + excluded.tasks, charged = account_money.charged + excluded.charged,
        refunded = account_money.refunded + excluded.refunded;
  END IF;
  UPDATE period_money SET charged = period_money.charged + add_charged, refunded = period_money.refunded + add_refunded
  WHERE manifest_path = (SELECT manifest_path FROM runs WHERE id = NEW.run_id) AND period = NEW.period;
  IF NOT FOUND THEN
    INSERT INTO period_money (manifest_path, period, charged, refunded)
      SELECT manifest_path, NEW.period, add_charged, add_refunded FROM runs WHERE id = NEW.run_id
      ON CONFLICT (manifest_path, period) DO UPDATE SET
        charged = period_money.charged + excluded.charged, refunded = period_money.refunded + excluded.refunded;
  END IF;
  UPDATE run_money SET charged = run_money.charged + add_charged, refunded = run_money.refunded + add_refunded
  WHERE run_id = NEW.run_id;
  IF NOT FOUND THEN
    INSERT INTO run_money (run_id, charged, refunded) VALUES (NEW.run_id, add_charged, add_refunded)
      ON CONFLICT (run_id) DO UPDATE SET charged = run_money.charged + excluded.charged,
        refunded = run_money.refunded + excluded.refunded;
  END IF;
  RETURN NULL;
END $$;
DROP TRIGGER account_money_kind ON ledger;
DROP TRIGGER account_money_sums ON ledger;
DROP TRIGGER period_money_ledger ON ledger;
DROP TRIGGER run_money_ledger ON ledger;
DROP FUNCTION account_money_kind();
DROP FUNCTION period_money_ledger();
DROP FUNCTION run_money_ledger();
CREATE TRIGGER ledger_money_kind BEFORE INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION ledger_money_kind_set();
CREATE TRIGGER ledger_sums AFTER INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION ledger_sums();

-- json_extract, json_type and julianday (a chained task's filled-in estimate, a run's budget, its active
-- time) are SQL functions PostgreSQL never inlines (the first two read from a subquery; the third casts
-- text to a time, which depends on a setting): each statement that called one planned its body again,
-- about 40 µs a call, five calls for each chained task filled in. As PL/pgSQL each is planned once per
-- session. The same bodies, the same answers.
CREATE OR REPLACE FUNCTION json_extract(doc text, path text) RETURNS text LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
  v jsonb := doc::jsonb #> string_to_array(substr(path, 3), '.');
BEGIN
  RETURN CASE jsonb_typeof(v) WHEN 'boolean' THEN CASE WHEN v = 'true'::jsonb THEN '1' ELSE '0' END
                              WHEN 'null' THEN NULL ELSE v #>> '{}' END;
END $$;
CREATE OR REPLACE FUNCTION json_type(doc text, path text) RETURNS text LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
  v jsonb := doc::jsonb #> string_to_array(substr(path, 3), '.');
BEGIN
  RETURN CASE jsonb_typeof(v) WHEN 'string' THEN 'text' WHEN 'boolean' THEN v #>> '{}'
           WHEN 'number' THEN CASE WHEN v #>> '{}' ~ '^-?[0-9]+$' THEN 'integer' ELSE 'real' END
           ELSE jsonb_typeof(v) END;
END $$;
CREATE OR REPLACE FUNCTION julianday(at text) RETURNS double precision LANGUAGE plpgsql IMMUTABLE STRICT AS $$
BEGIN
  RETURN extract(epoch FROM at::timestamptz)::double precision / 86400.0 + 2440587.5;
END $$;

-- A text as a JSON document, or NULL when it is not one: the report's page of tasks parses each body once
-- with it (src/store/pg/overrides.ts) where SQLite's statement asks json_valid, json_type and json_extract
-- for each field.
CREATE FUNCTION json_doc(doc text) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE STRICT AS $$
BEGIN
  RETURN doc::jsonb;
EXCEPTION WHEN others THEN
  RETURN NULL;
END $$;

-- json_valid (the CHECKs of a job's record, a run's settings, a chained task's planned estimate) catches the
-- error of a cast: a subtransaction per call. PostgreSQL 16 says whether a text is JSON without raising
-- one (pg_input_is_valid); on 15 the function stays as it was. The new one must answer as the old on a
-- document and a non-document before it is kept.
DO $do$
BEGIN
  IF current_setting('server_version_num')::int >= 160000 THEN
    BEGIN
      EXECUTE $f$CREATE OR REPLACE FUNCTION json_valid(doc text) RETURNS boolean LANGUAGE sql STABLE STRICT AS
        'SELECT pg_input_is_valid(doc, ''json'')'$f$;
      IF NOT json_valid('{"a":[1,2]}') OR json_valid('{"a":') THEN
        RAISE EXCEPTION 'pg_input_is_valid answers otherwise';
      END IF;
    EXCEPTION WHEN others THEN
      NULL;
    END;
  END IF;
END $do$;
`,
  },
  {
    // PostgreSQL only: SQLite's round() is the rule this one follows.
    id: 23,
    name: "tokens to micro-tokens exactly as SQLite's round() makes them, for amounts below zero too",
    sql: `
-- Every statement of the store rounds token amounts with micro() here (src/store/pg/overrides.ts), so it
-- must give SQLite's integer for every amount. micro() of migration 13 added a half and took the floor:
-- the same for amounts of zero or more, but a tie below zero went up (-2.5 micro-tokens to -2) where
-- SQLite goes away from zero (-3), as for a refund rounded as a negative amount or a difference. This is
-- SQLite's own rule (roundFunc): a value beyond 2^52 has no fraction and is kept; any other gets a half
-- added away from zero and its fraction cut. Not STRICT (a NULL gives NULL all the same), so that
-- PostgreSQL still inlines it into the statements and triggers that call it.
CREATE OR REPLACE FUNCTION micro(tokens double precision) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT (CASE WHEN tokens * 1000000 > 4503599627370496 OR tokens * 1000000 < -4503599627370496
            THEN tokens * 1000000
          WHEN tokens < 0 THEN trunc(tokens * 1000000 - 0.5)
          ELSE trunc(tokens * 1000000 + 0.5) END)::bigint
$$;
`,
  },
  {
    // PostgreSQL only: SQLite's one writer never waits for another.
    id: 24,
    name: "a charge or refund takes its run's money lock before the run's sums",
    sql: `
-- Every spend takes its run's money lock (a transaction-level advisory lock, src/store/pg/overrides.ts),
-- then moves the sums; a charge or a refund moved the run's sums (run_money, account_money, period_money
-- rows, by the ledger's triggers) without it. Two workers whose group commits each held one of the two,
-- a spend's lock and a charge's row, then waited for the other: a deadlock, which the server breaks only
-- after deadlock_timeout (1 s), undoing one. Taken here before the row is written, every transaction
-- takes a run's money lock before the run's money rows, in one order.
CREATE FUNCTION ledger_money_lock() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('mediabatch money ' || NEW.run_id, 0));
  RETURN NEW;
END $$;
CREATE TRIGGER ledger_money_lock BEFORE INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION ledger_money_lock();
`,
  },
  {
    // PostgreSQL only: the same rules and the same triggers' work, less of the server's per statement.
    id: 25,
    name: "a task's rules held by its columns' types, and one trigger for its moves",
    sql: `
-- PostgreSQL reads a table's CHECK constraints from their stored text, and plans them, in every statement
-- that writes a row (all of them, whatever columns it sets), and each trigger's WHEN condition in every
-- statement that may fire it: thirteen CHECKs and six WHENs for each of a task's four moves, most of the
-- server's work of a move (≈ 250 µs of CPU an UPDATE before, ≈ 32 after, timed in a scratch database). A domain's rule is planned once per session and checked only where a
-- statement gives the column a value; one trigger without a condition costs one call of a function whose
-- tests are planned once. The same rules, the same refusals (check_violation), the same trigger actions.
CREATE DOMAIN task_state AS text COLLATE "C";
CREATE DOMAIN task_verdict AS text COLLATE "C";
CREATE DOMAIN job_source AS text COLLATE "C";
CREATE DOMAIN json_text AS text COLLATE "C";
CREATE DOMAIN flag AS bigint;
CREATE DOMAIN count_of AS bigint;
CREATE DOMAIN ordinal AS bigint;

DROP TRIGGER reservations_unsent ON tasks;
DROP TRIGGER reservations_requeued ON tasks;
DROP TRIGGER task_review_version ON tasks;
DROP TRIGGER task_upstream_done ON tasks;
DROP TRIGGER task_upstream_undone ON tasks;
DROP TRIGGER task_counts_move ON tasks;

${checksAsDomains('tasks', [
  ['state', 'task_state'],
  ['est_assumed', 'flag'],
  ['cost_assumed', 'flag'],
  ['recovered', 'flag'],
  ['review', 'flag'],
  ['verdict', 'task_verdict'],
  ['source', 'job_source'],
  ['planned_estimate', 'json_text'],
  ['retries', 'count_of'],
  ['expected_ms', 'count_of'],
  ['waits', 'count_of'],
  ['attempt', 'ordinal'],
  ['version', 'ordinal'],
])}

ALTER DOMAIN task_state ADD CONSTRAINT task_state_check CHECK (VALUE IN (${TASK_STATES_2}, 'skipped'));
ALTER DOMAIN task_verdict ADD CONSTRAINT task_verdict_check CHECK (VALUE IN ('approved', 'rejected'));
ALTER DOMAIN job_source ADD CONSTRAINT job_source_check CHECK (VALUE IN ('poll', 'callback'));
ALTER DOMAIN json_text ADD CONSTRAINT json_text_check CHECK (json_valid(VALUE));
ALTER DOMAIN flag ADD CONSTRAINT flag_check CHECK (VALUE IN (0, 1));
ALTER DOMAIN count_of ADD CONSTRAINT count_of_check CHECK (VALUE >= 0);
ALTER DOMAIN ordinal ADD CONSTRAINT ordinal_check CHECK (VALUE >= 1);

-- The five triggers of a task's move, in the order they fired (by name), each under its former condition.
-- A task that gives its result (or takes it back) has each of its downstreams wait for one upstream less
-- (or more), when it has any (a run without chains has none).
CREATE FUNCTION task_moved() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  gives_now boolean := NEW.state = 'done' AND (NEW.review = 0 OR NEW.verdict IS NOT DISTINCT FROM 'approved');
  gave boolean := OLD.state = 'done' AND (OLD.review = 0 OR OLD.verdict IS NOT DISTINCT FROM 'approved');
BEGIN
  IF OLD.state = 'in_doubt' AND NEW.state = 'pending' THEN
    UPDATE reservations SET state = 'released', closed_at = NEW.updated_at
    WHERE run_id = NEW.run_id AND task_id = NEW.task_id AND state IN ('held', 'doubt') AND state = 'doubt';
  END IF;
  IF OLD.state = 'pending' AND NEW.state NOT IN ('pending', 'submitting') THEN
    UPDATE reservations SET state = 'released', closed_at = NEW.updated_at
    WHERE run_id = NEW.run_id AND task_id = NEW.task_id AND state IN ('held', 'doubt') AND state = 'held';
  END IF;
  IF NEW.review = 1 AND (OLD.state IS DISTINCT FROM NEW.state OR OLD.verdict IS DISTINCT FROM NEW.verdict
      OR OLD.attempt IS DISTINCT FROM NEW.attempt) THEN
    UPDATE tasks SET version = version + 1 WHERE run_id = NEW.run_id AND task_id = NEW.task_id;
  END IF;
  -- Two tests, not one: in one expression with the query, each call would plan the query again (its plan
  -- for the values at hand, where the first test is false and the query left out, always looks cheaper).
  IF gives_now IS DISTINCT FROM gave THEN
    IF EXISTS (SELECT 1 FROM task_upstreams WHERE run_id = NEW.run_id AND upstream_id = NEW.task_id) THEN
      UPDATE tasks SET waits = waits + CASE WHEN gives_now THEN -1 ELSE 1 END WHERE run_id = NEW.run_id
        AND task_id IN (SELECT task_id FROM task_upstreams WHERE run_id = NEW.run_id AND upstream_id = NEW.task_id);
    END IF;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER task_moved AFTER UPDATE OF state, review, verdict, attempt ON tasks FOR EACH ROW
  EXECUTE FUNCTION task_moved();
DROP FUNCTION reservations_unsent();
DROP FUNCTION reservations_requeued();
DROP FUNCTION task_review_version();
DROP FUNCTION task_upstream_done();
DROP FUNCTION task_upstream_undone();

-- Counted at commit as before (migration 19); its condition, in the function, is tested there.
${taskCountsMove(`  IF OLD.state IS NOT DISTINCT FROM NEW.state AND OLD.est_tokens IS NOT DISTINCT FROM NEW.est_tokens
      AND OLD.est_min IS NOT DISTINCT FROM NEW.est_min AND OLD.est_max IS NOT DISTINCT FROM NEW.est_max THEN
    RETURN NULL;
  END IF;
`)}
CREATE CONSTRAINT TRIGGER task_counts_move AFTER UPDATE OF state, est_tokens, est_min, est_max ON tasks
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION task_counts_move();
`,
  },
  {
    // PostgreSQL only: as migration 25, for the other tables a task writes.
    id: 26,
    name: "the rules of a task's attempts, events, files, charges, reservations and sums held by their columns' types",
    sql: `
-- Each of these rows is written once or more for every task (the ledger's charge and the three sums it
-- moves, the four moves of task_counts at commit, an attempt, its reservation, its job's event, its file):
-- as for tasks (migration 25), their CHECKs were read and planned in each of those statements.
CREATE DOMAIN attempt_outcome AS text COLLATE "C";
CREATE DOMAIN file_kind AS text COLLATE "C";
CREATE DOMAIN ledger_kind AS text COLLATE "C";
CREATE DOMAIN money_kind AS text COLLATE "C";
CREATE DOMAIN ledger_period AS text COLLATE "C";
CREATE DOMAIN reservation_state AS text COLLATE "C";
CREATE DOMAIN reservation_kind AS text COLLATE "C";
CREATE DOMAIN token_amount AS double precision;

${checksAsDomains('attempts', [
  ['outcome', 'attempt_outcome'],
  ['attempt_no', 'ordinal'],
])}
${checksAsDomains('job_events', [
  ['source', 'job_source'],
  ['record', 'json_text'],
])}
${checksAsDomains('files', [
  ['kind', 'file_kind'],
  ['idx', 'count_of'],
  ['bytes', 'count_of'],
])}
${checksAsDomains('ledger', [
  ['period', 'ledger_period'],
  ['kind', 'ledger_kind'],
  ['tokens', 'token_amount'],
  ['assumed', 'flag'],
  ['reroll', 'flag'],
  ['money_kind', 'money_kind'],
])}
${checksAsDomains('task_counts', [
  ['n', 'count_of'],
  ['est_micro', 'count_of'],
  ['est_min_micro', 'count_of'],
  ['est_max_micro', 'count_of'],
])}
${checksAsDomains('run_money', [
  ['budget', 'count_of'],
  ['charged', 'count_of'],
  ['refunded', 'count_of'],
  ['period', 'ledger_period'],
  ['period_budget', 'count_of'],
])}
${checksAsDomains('reservations', [
  ['kind', 'reservation_kind'],
  ['amount', 'count_of'],
  ['state', 'reservation_state'],
  ['charged', 'count_of'],
])}
${checksAsDomains('account_money', [
  ['kind', 'money_kind'],
  ['jobs', 'count_of'],
  ['tasks', 'count_of'],
  ['charged', 'count_of'],
  ['refunded', 'count_of'],
])}
${checksAsDomains('period_money', [
  ['charged', 'count_of'],
  ['refunded', 'count_of'],
])}
${checksAsDomains('workers', [
  ['in_flight', 'count_of'],
  ['submitted', 'count_of'],
])}

-- And the few tables written once a run or a decision (runs, uploads, decisions): no table keeps a CHECK,
-- so none is read again in a statement (test/store/column-rules.test.ts holds it so).
CREATE DOMAIN run_state AS text COLLATE "C";
CREATE DOMAIN decision_verdict AS text COLLATE "C";
CREATE DOMAIN sha256_hex AS text COLLATE "C";
-- A trigger on a column's updates depends on the column, whose type cannot change under it.
DROP TRIGGER run_money_settings ON runs;
${checksAsDomains('runs', [
  ['state', 'run_state'],
  ['settings', 'json_text'],
  ['active_ms', 'count_of'],
])}
CREATE TRIGGER run_money_settings AFTER UPDATE OF settings ON runs FOR EACH ROW EXECUTE FUNCTION run_money_settings();
${checksAsDomains('uploads', [
  ['sha256', 'sha256_hex'],
  ['bytes', 'count_of'],
])}
${checksAsDomains('decisions', [
  ['verdict', 'decision_verdict'],
  ['attempt', 'ordinal'],
])}

ALTER DOMAIN run_state ADD CONSTRAINT run_state_check CHECK (VALUE IN ('running', 'interrupted', 'finished', 'refused'));
ALTER DOMAIN decision_verdict ADD CONSTRAINT decision_verdict_check CHECK (VALUE IN ('approve', 'reject', 'reroll'));
ALTER DOMAIN sha256_hex ADD CONSTRAINT sha256_hex_check CHECK (length(VALUE) = 64);
ALTER DOMAIN attempt_outcome ADD CONSTRAINT attempt_outcome_check
  CHECK (VALUE IN ('submitted', 'rejected', 'not_charged', 'in_doubt'));
ALTER DOMAIN file_kind ADD CONSTRAINT file_kind_check CHECK (VALUE IN ('image', 'audio', 'video', 'json'));
ALTER DOMAIN ledger_kind ADD CONSTRAINT ledger_kind_check CHECK (VALUE IN ('charge', 'refund'));
ALTER DOMAIN money_kind ADD CONSTRAINT money_kind_check
  CHECK (VALUE IN ('first', 'retry', 'reroll', 'doubt_retry', 'sent_again'));
ALTER DOMAIN ledger_period ADD CONSTRAINT ledger_period_check CHECK (VALUE ~ '^[0-9]{4}-[0-1][0-9]$');
ALTER DOMAIN reservation_state ADD CONSTRAINT reservation_state_check
  CHECK (VALUE IN ('held', 'doubt', 'settled', 'released'));
ALTER DOMAIN reservation_kind ADD CONSTRAINT reservation_kind_check
  CHECK (VALUE IN ('first', 'retry', 'reroll', 'doubt'));
ALTER DOMAIN token_amount ADD CONSTRAINT token_amount_check CHECK (VALUE >= 0);

-- A charge's two triggers before its row is written, its kind of job (migration 21) then its run's money
-- lock (migration 24), in that order (by name) as one: one call of a function for each row where there were two.
CREATE FUNCTION ledger_before() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.kind = 'refund' THEN
    NEW.money_kind := coalesce((SELECT c.money_kind FROM ledger c WHERE c.img_uuid = NEW.img_uuid AND c.kind = 'charge'),
      'first');
  ELSIF NEW.reroll = 1 THEN
    NEW.money_kind := 'reroll';
  ELSIF NOT EXISTS (SELECT 1 FROM attempts a
                    WHERE a.run_id = NEW.run_id AND a.task_id = NEW.task_id AND a.attempt_no > 1) THEN
    NEW.money_kind := 'first';
  ELSE
    NEW.money_kind := ledger_money_kind(NEW.run_id, NEW.task_id, NEW.img_uuid);
  END IF;
  PERFORM pg_advisory_xact_lock(hashtextextended('mediabatch money ' || NEW.run_id, 0));
  RETURN NEW;
END $$;
DROP TRIGGER ledger_money_kind ON ledger;
DROP TRIGGER ledger_money_lock ON ledger;
DROP FUNCTION ledger_money_kind_set();
DROP FUNCTION ledger_money_lock();
CREATE TRIGGER ledger_before BEFORE INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION ledger_before();
`,
  },
  {
    // PostgreSQL only: a worker leaves or is swept only from a PostgreSQL state.
    id: 27,
    name: 'the tasks a worker still holds, found by an index of their own',
    sql: `
-- A worker leaving its run (or found lost) gives back the tasks it still holds: claimed to send, being
-- sent, or its job watched or fetched (HELD_STATES in src/store/claims.ts). tasks_claimed indexed every
-- task ever claimed, so leaving a run of 1,000,000 tasks read (and used to rewrite) every one of them. A
-- finished task leaves this index as it finishes, so it holds about what the workers have in hand, and
-- every statement that reads a claim names a state among these.
CREATE INDEX tasks_held ON tasks (run_id, claimed_by)
  WHERE claimed_by IS NOT NULL
    AND state IN ('pending', 'submitting', 'submitted', 'running', 'stalled', 'downloading', 'unfetched');
DROP INDEX tasks_claimed;
`,
  },
  {
    id: 28,
    name: "a schedule's claim of a firing: who holds it and until when, until its run is made",
    sql: `
-- A scheduler claims a slot (last_fired_at) before it makes the slot's run; one killed in between left
-- the slot counted with no run. The claim names its holder (pid@host#nonce) and lives until claim_expires_at,
-- renewed by the holder's heartbeat, and is settled (NULL) once the run is made, the slot skipped or the
-- firing ended: a claim that outlives its holder (expired, or its process gone) is taken over by another.
ALTER TABLE schedules ADD COLUMN claim_holder TEXT COLLATE "C";
ALTER TABLE schedules ADD COLUMN claim_expires_at TEXT COLLATE "C";
`,
  },
  {
    id: 29,
    name: "a run's plan digest: a worker joining the run with another plan is refused",
    sql: `
-- The sha256 of the plan the run's tasks were last stored from (src/store/plan-digest.ts), recorded once
-- every task of the plan is stored, and how many tasks that plan has, recorded as its storing starts: a
-- worker of a fleet joining the run compares its own plan's with them, and waits for the digest of a plan
-- still being stored. A run from before has neither, and is joined as before. Their rules are their
-- types' (migration 26).
ALTER TABLE runs ADD COLUMN plan_digest sha256_hex;
ALTER TABLE runs ADD COLUMN plan_tasks count_of;
`,
  },
  {
    // PostgreSQL only: SQLite updates a row in place, and adds to an index only the entries whose columns change.
    id: 30,
    name: 'the longest-first order of the claims holds only pending tasks',
    sql: `
-- PostgreSQL writes a new version of a row on every update, and, unless no indexed column changed, an entry
-- for it in every index of the table whose condition it meets: a task's four moves after its claim
-- (submitting, submitted, downloading, done) each added one to tasks_ready_longest, five columns wide,
-- which only the claims read, and they read pending tasks alone. Holding only pending tasks, it is written
-- when a task is stored or put back, and the claims still walk it in their order and stop at 64.
CREATE INDEX tasks_ready_longest_pending ON tasks (run_id, waits, expected_ms DESC, seq) WHERE state = 'pending';
DROP INDEX tasks_ready_longest;
ALTER INDEX tasks_ready_longest_pending RENAME TO tasks_ready_longest;
`,
  },
  {
    id: 31,
    name: "a run's plan still being stored: its digest kept from the start, the rest stored by whoever remains",
    sql: `
-- 1 while the tasks of a run's plan are stored in the background (its digest and count recorded before the
-- first of them, so that a worker joining compares its own at once); 0 once every one is stored. NULL for
-- a run from before: there the digest itself says the plan is all stored. Its rule is its type's.
ALTER TABLE runs ADD COLUMN plan_storing flag;
`,
  },
];
