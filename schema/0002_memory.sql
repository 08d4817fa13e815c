-- Migration 2: the HTAM memory graph (docs/architecture.md, "HTAM" and "Store"):
-- global directions, local
-- strategies under them, evidence rows of the local strategies, transition edges
-- between directions, and a marker that the seed (schema/seed_memory.json) was loaded.
-- Lists come back in insertion order (rowid), so an export re-imported lists the same.
-- JSON columns hold arrays of strings (or the knob move object); the store validates
-- their contents before writing (store/memory_validate.c).

CREATE TABLE global_nodes (
  id           TEXT    PRIMARY KEY,
  name         TEXT    NOT NULL,
  intent       TEXT    NOT NULL DEFAULT '',
  objectives   TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(objectives)),
  triggers     TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(triggers)),
  risks        TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(risks)),
  prior        REAL    NOT NULL DEFAULT 0,
  n            INTEGER NOT NULL DEFAULT 0 CHECK (n >= 0),            -- tries
  successes    INTEGER NOT NULL DEFAULT 0 CHECK (successes BETWEEN 0 AND n),
  improvements INTEGER NOT NULL DEFAULT 0 CHECK (improvements BETWEEN 0 AND n),
  reward_sum   REAL    NOT NULL DEFAULT 0,
  ema          REAL,                                                  -- NULL until the first try
  created_at   TEXT    NOT NULL,
  updated_at   TEXT    NOT NULL
);

CREATE TABLE local_nodes (
  id           TEXT    PRIMARY KEY,
  global_id    TEXT    NOT NULL REFERENCES global_nodes (id),
  name         TEXT    NOT NULL,
  edit_pattern TEXT    NOT NULL DEFAULT '',
  knob_move    TEXT    CHECK (knob_move IS NULL OR json_valid(knob_move)), -- NULL: no builtin move
  checks       TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(checks)),
  families     TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(families)),
  n            INTEGER NOT NULL DEFAULT 0 CHECK (n >= 0),
  successes    INTEGER NOT NULL DEFAULT 0 CHECK (successes BETWEEN 0 AND n),
  reward_sum   REAL    NOT NULL DEFAULT 0,
  created_at   TEXT    NOT NULL,
  updated_at   TEXT    NOT NULL
);
CREATE INDEX local_nodes_global ON local_nodes (global_id);

-- task_id and candidate_id are not foreign keys: evidence outlives a deleted task.
-- The store keeps the newest MEMORY_EVIDENCE_KEEP rows per local node (store/memory.h).
CREATE TABLE local_evidence (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  local_id     TEXT    NOT NULL REFERENCES local_nodes (id),
  task_id      TEXT,
  candidate_id TEXT,
  reward       REAL    NOT NULL,
  outcome      TEXT    NOT NULL,
  note         TEXT,
  created_at   TEXT    NOT NULL
);
CREATE INDEX local_evidence_local ON local_evidence (local_id, id);

-- n and reward_sum are weighted by the position weight alpha_i of the prefix entry.
CREATE TABLE edges (
  from_id      TEXT    NOT NULL REFERENCES global_nodes (id),
  to_id        TEXT    NOT NULL REFERENCES global_nodes (id),
  when_text    TEXT    NOT NULL DEFAULT '',
  rationale    TEXT    NOT NULL DEFAULT '',
  risks        TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(risks)),
  n            REAL    NOT NULL DEFAULT 0 CHECK (n >= 0),
  reward_sum   REAL    NOT NULL DEFAULT 0,
  created_at   TEXT    NOT NULL,
  updated_at   TEXT    NOT NULL,
  PRIMARY KEY (from_id, to_id)
);
CREATE INDEX edges_to ON edges (to_id);

-- key 'seeded': when the seed was first loaded (or an import replaced the memory), so
-- a memory its users emptied on purpose is not seeded again at the next start.
CREATE TABLE memory_meta (
  key          TEXT    PRIMARY KEY,
  value        TEXT    NOT NULL
);
