-- Migration 1 for PostgreSQL (the pair of schema/0001_tasks.sql; docs/architecture.md,
-- "Store backends"): tasks, their event logs and their candidates, plus the few functions
-- that let the store's SQL read the same on both backends.
-- store/migrate.c runs each migration inside its own transaction: no BEGIN/COMMIT here.

-- json_valid(text): SQLite's JSON check, for the same CHECK constraints.
CREATE FUNCTION json_valid(doc text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  PERFORM doc::jsonb;
  RETURN true;
EXCEPTION WHEN others THEN
  RETURN false;
END $$;

-- json_extract(text, '$.a.b'): SQLite's path read, for a string or number member (as text).
CREATE FUNCTION json_extract(doc text, path text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT doc::jsonb #>> string_to_array(substr(path, 3), '.')
$$;

-- An INTEGER PRIMARY KEY of SQLite: NULL takes the next number of the sequence, and an
-- explicit number (an import, `opforge store copy`) moves the sequence past it, so the
-- numbers that follow never collide. TG_ARGV: the column, the sequence.
CREATE FUNCTION opforge_rowid() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v bigint := (to_jsonb(NEW) ->> TG_ARGV[0])::bigint;
BEGIN
  IF v IS NULL THEN
    NEW := jsonb_populate_record(NEW, jsonb_build_object(TG_ARGV[0], nextval(TG_ARGV[1]::regclass)));
  ELSIF v > COALESCE(pg_sequence_last_value(TG_ARGV[1]::regclass), 0) THEN
    PERFORM setval(TG_ARGV[1]::regclass, v);
  END IF;
  RETURN NEW;
END $$;

CREATE SEQUENCE tasks_seq_seq;
CREATE TABLE tasks (
  seq              BIGINT  PRIMARY KEY,
  id               TEXT    NOT NULL UNIQUE,
  name             TEXT    NOT NULL,
  status           TEXT    NOT NULL DEFAULT 'queued'
                   CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  cancel_requested BIGINT  NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
  options          TEXT    NOT NULL CHECK (json_valid(options)),
  reference        TEXT    NOT NULL,
  reference_bytes  BIGINT  NOT NULL CHECK (reference_bytes >= 0),
  progress         TEXT    NOT NULL CHECK (json_valid(progress)),
  baselines        TEXT    CHECK (baselines IS NULL OR json_valid(baselines)),
  error            TEXT    CHECK (error IS NULL OR json_valid(error)),
  claimed_by       TEXT,
  step             BIGINT  NOT NULL DEFAULT 0,
  created_at       TEXT    NOT NULL,
  updated_at       TEXT    NOT NULL
);
CREATE TRIGGER tasks_seq BEFORE INSERT ON tasks
  FOR EACH ROW EXECUTE FUNCTION opforge_rowid('seq', 'tasks_seq_seq');
CREATE INDEX tasks_status_seq ON tasks (status, seq);

CREATE TABLE events (
  task_id TEXT    NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
  seq     BIGINT  NOT NULL CHECK (seq >= 1),
  type    TEXT    NOT NULL,
  time    TEXT    NOT NULL,
  data    TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(data)),
  PRIMARY KEY (task_id, seq)
);

-- A server following a task that another server runs hears of its new events here
-- (LISTEN opforge_events; the payload is the task id), once the inserting transaction
-- commits.
CREATE FUNCTION opforge_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('opforge_events', NEW.task_id);
  RETURN NULL;
END $$;
CREATE TRIGGER events_notify AFTER INSERT ON events
  FOR EACH ROW EXECUTE FUNCTION opforge_events_notify();

CREATE TABLE candidates (
  id         TEXT    PRIMARY KEY,
  task_id    TEXT    NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
  seq        BIGINT  NOT NULL,
  step       BIGINT  NOT NULL,
  parent_id  TEXT,
  source     TEXT    NOT NULL,
  options    TEXT    CHECK (options IS NULL OR json_valid(options)),
  plan       TEXT    CHECK (plan IS NULL OR json_valid(plan)),
  result     TEXT    CHECK (result IS NULL OR json_valid(result)),
  direction  TEXT,
  strategy   TEXT,
  step_kind  TEXT,
  created_at TEXT    NOT NULL,
  UNIQUE (task_id, seq)
);
CREATE INDEX candidates_task_step ON candidates (task_id, step);
