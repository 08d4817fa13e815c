-- Migration 1: tasks, their event logs and their candidates.
-- store/migrate.c runs each migration inside its own transaction, so a migration must not
-- contain BEGIN/COMMIT. Add a later change as a new file; never edit an applied one.

-- seq orders tasks newest first and backs the list cursor. AUTOINCREMENT keeps it from
-- ever being reused after a delete, so a cursor never points into newer rows.
CREATE TABLE tasks (
  seq              INTEGER PRIMARY KEY AUTOINCREMENT,
  id               TEXT    NOT NULL UNIQUE,
  name             TEXT    NOT NULL,
  status           TEXT    NOT NULL DEFAULT 'queued'
                   CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
  options          TEXT    NOT NULL CHECK (json_valid(options)),
  reference        TEXT    NOT NULL,
  reference_bytes  INTEGER NOT NULL CHECK (reference_bytes >= 0),
  progress         TEXT    NOT NULL CHECK (json_valid(progress)),
  baselines        TEXT    CHECK (baselines IS NULL OR json_valid(baselines)),
  error            TEXT    CHECK (error IS NULL OR json_valid(error)),
  claimed_by       TEXT,                       -- worker holding a running task
  step             INTEGER NOT NULL DEFAULT 0, -- last recorded step, for resume
  created_at       TEXT    NOT NULL,           -- RFC 3339 UTC with milliseconds
  updated_at       TEXT    NOT NULL
);
CREATE INDEX tasks_status_seq ON tasks (status, seq);

-- seq starts at 1 per task and has no gaps (store/events.c allocates it inside the
-- inserting transaction).
CREATE TABLE events (
  task_id TEXT    NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
  seq     INTEGER NOT NULL CHECK (seq >= 1),
  type    TEXT    NOT NULL,
  time    TEXT    NOT NULL,
  data    TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(data)),
  PRIMARY KEY (task_id, seq)
) WITHOUT ROWID;

-- One row per proposed kernel. seq orders a task's candidates; step is the loop step
-- that produced it (a step may produce several). parent_id is the tree parent.
CREATE TABLE candidates (
  id         TEXT    PRIMARY KEY,
  task_id    TEXT    NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
  seq        INTEGER NOT NULL,
  step       INTEGER NOT NULL,
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
