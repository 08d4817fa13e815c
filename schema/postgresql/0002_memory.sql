-- Migration 2 for PostgreSQL (the pair of schema/0002_memory.sql): the HTAM memory graph.
-- rowid keeps SQLite's insertion order, which the store lists by.

CREATE TABLE global_nodes (
  rowid        BIGSERIAL,
  id           TEXT    PRIMARY KEY,
  name         TEXT    NOT NULL,
  intent       TEXT    NOT NULL DEFAULT '',
  objectives   TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(objectives)),
  triggers     TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(triggers)),
  risks        TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(risks)),
  prior        DOUBLE PRECISION NOT NULL DEFAULT 0,
  n            BIGINT  NOT NULL DEFAULT 0 CHECK (n >= 0),
  successes    BIGINT  NOT NULL DEFAULT 0 CHECK (successes BETWEEN 0 AND n),
  improvements BIGINT  NOT NULL DEFAULT 0 CHECK (improvements BETWEEN 0 AND n),
  reward_sum   DOUBLE PRECISION NOT NULL DEFAULT 0,
  ema          DOUBLE PRECISION,
  created_at   TEXT    NOT NULL,
  updated_at   TEXT    NOT NULL
);

CREATE TABLE local_nodes (
  rowid        BIGSERIAL,
  id           TEXT    PRIMARY KEY,
  global_id    TEXT    NOT NULL REFERENCES global_nodes (id),
  name         TEXT    NOT NULL,
  edit_pattern TEXT    NOT NULL DEFAULT '',
  knob_move    TEXT    CHECK (knob_move IS NULL OR json_valid(knob_move)),
  checks       TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(checks)),
  families     TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(families)),
  n            BIGINT  NOT NULL DEFAULT 0 CHECK (n >= 0),
  successes    BIGINT  NOT NULL DEFAULT 0 CHECK (successes BETWEEN 0 AND n),
  reward_sum   DOUBLE PRECISION NOT NULL DEFAULT 0,
  created_at   TEXT    NOT NULL,
  updated_at   TEXT    NOT NULL
);
CREATE INDEX local_nodes_global ON local_nodes (global_id);

CREATE SEQUENCE local_evidence_id_seq;
CREATE TABLE local_evidence (
  id           BIGINT  PRIMARY KEY,
  local_id     TEXT    NOT NULL REFERENCES local_nodes (id),
  task_id      TEXT,
  candidate_id TEXT,
  reward       DOUBLE PRECISION NOT NULL,
  outcome      TEXT    NOT NULL,
  note         TEXT,
  created_at   TEXT    NOT NULL
);
CREATE TRIGGER local_evidence_id BEFORE INSERT ON local_evidence
  FOR EACH ROW EXECUTE FUNCTION opforge_rowid('id', 'local_evidence_id_seq');
CREATE INDEX local_evidence_local ON local_evidence (local_id, id);

CREATE TABLE edges (
  rowid        BIGSERIAL,
  from_id      TEXT    NOT NULL REFERENCES global_nodes (id),
  to_id        TEXT    NOT NULL REFERENCES global_nodes (id),
  when_text    TEXT    NOT NULL DEFAULT '',
  rationale    TEXT    NOT NULL DEFAULT '',
  risks        TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(risks)),
  n            DOUBLE PRECISION NOT NULL DEFAULT 0 CHECK (n >= 0),
  reward_sum   DOUBLE PRECISION NOT NULL DEFAULT 0,
  created_at   TEXT    NOT NULL,
  updated_at   TEXT    NOT NULL,
  PRIMARY KEY (from_id, to_id)
);
CREATE INDEX edges_to ON edges (to_id);

CREATE TABLE memory_meta (
  key          TEXT    PRIMARY KEY,
  value        TEXT    NOT NULL
);
