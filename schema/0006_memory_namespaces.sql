-- Migration 6: memory namespaces (docs/architecture.md, "Store"). Every memory record
-- belongs to a namespace; the memory that existed before is the namespace 'default'. A
-- task reads and writes only the namespace its submission names, so ablation arms and
-- experiments run on memories of their own. The tables are rebuilt because their keys
-- gain the namespace: the old ones are renamed, the new ones filled from them in rowid
-- order (lists keep their order), and the old ones dropped, children first.

-- origin: 'seed', 'empty', or the name of the namespace it was copied from.
CREATE TABLE memory_namespaces (
  name       TEXT PRIMARY KEY,
  origin     TEXT NOT NULL,
  created_at TEXT NOT NULL
);
INSERT INTO memory_namespaces (name, origin, created_at)
  VALUES ('default', 'seed', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));

ALTER TABLE local_evidence RENAME TO local_evidence_v4;
ALTER TABLE edges RENAME TO edges_v4;
ALTER TABLE local_nodes RENAME TO local_nodes_v4;
ALTER TABLE global_nodes RENAME TO global_nodes_v4;
DROP INDEX local_nodes_global;
DROP INDEX local_evidence_local;
DROP INDEX edges_to;

CREATE TABLE global_nodes (
  namespace    TEXT    NOT NULL REFERENCES memory_namespaces (name),
  id           TEXT    NOT NULL,
  name         TEXT    NOT NULL,
  intent       TEXT    NOT NULL DEFAULT '',
  objectives   TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(objectives)),
  triggers     TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(triggers)),
  risks        TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(risks)),
  prior        REAL    NOT NULL DEFAULT 0,
  n            INTEGER NOT NULL DEFAULT 0 CHECK (n >= 0),
  successes    INTEGER NOT NULL DEFAULT 0 CHECK (successes BETWEEN 0 AND n),
  improvements INTEGER NOT NULL DEFAULT 0 CHECK (improvements BETWEEN 0 AND n),
  reward_sum   REAL    NOT NULL DEFAULT 0,
  ema          REAL,
  created_at   TEXT    NOT NULL,
  updated_at   TEXT    NOT NULL,
  PRIMARY KEY (namespace, id)
);

CREATE TABLE local_nodes (
  namespace    TEXT    NOT NULL,
  id           TEXT    NOT NULL,
  global_id    TEXT    NOT NULL,
  name         TEXT    NOT NULL,
  edit_pattern TEXT    NOT NULL DEFAULT '',
  knob_move    TEXT    CHECK (knob_move IS NULL OR json_valid(knob_move)),
  checks       TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(checks)),
  families     TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(families)),
  n            INTEGER NOT NULL DEFAULT 0 CHECK (n >= 0),
  successes    INTEGER NOT NULL DEFAULT 0 CHECK (successes BETWEEN 0 AND n),
  reward_sum   REAL    NOT NULL DEFAULT 0,
  created_at   TEXT    NOT NULL,
  updated_at   TEXT    NOT NULL,
  PRIMARY KEY (namespace, id),
  FOREIGN KEY (namespace, global_id) REFERENCES global_nodes (namespace, id)
);
CREATE INDEX local_nodes_global ON local_nodes (namespace, global_id);

CREATE TABLE local_evidence (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  namespace    TEXT    NOT NULL,
  local_id     TEXT    NOT NULL,
  task_id      TEXT,
  candidate_id TEXT,
  reward       REAL    NOT NULL,
  outcome      TEXT    NOT NULL,
  note         TEXT,
  created_at   TEXT    NOT NULL,
  FOREIGN KEY (namespace, local_id) REFERENCES local_nodes (namespace, id)
);
CREATE INDEX local_evidence_local ON local_evidence (namespace, local_id, id);

CREATE TABLE edges (
  namespace    TEXT    NOT NULL,
  from_id      TEXT    NOT NULL,
  to_id        TEXT    NOT NULL,
  when_text    TEXT    NOT NULL DEFAULT '',
  rationale    TEXT    NOT NULL DEFAULT '',
  risks        TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(risks)),
  n            REAL    NOT NULL DEFAULT 0 CHECK (n >= 0),
  reward_sum   REAL    NOT NULL DEFAULT 0,
  created_at   TEXT    NOT NULL,
  updated_at   TEXT    NOT NULL,
  PRIMARY KEY (namespace, from_id, to_id),
  FOREIGN KEY (namespace, from_id) REFERENCES global_nodes (namespace, id),
  FOREIGN KEY (namespace, to_id) REFERENCES global_nodes (namespace, id)
);
CREATE INDEX edges_to ON edges (namespace, to_id);

INSERT INTO global_nodes (rowid, namespace, id, name, intent, objectives, triggers, risks,
                          prior, n, successes, improvements, reward_sum, ema, created_at,
                          updated_at)
  SELECT rowid, 'default', id, name, intent, objectives, triggers, risks, prior, n,
         successes, improvements, reward_sum, ema, created_at, updated_at
  FROM global_nodes_v4 ORDER BY rowid;
INSERT INTO local_nodes (rowid, namespace, id, global_id, name, edit_pattern, knob_move,
                         checks, families, n, successes, reward_sum, created_at, updated_at)
  SELECT rowid, 'default', id, global_id, name, edit_pattern, knob_move, checks, families,
         n, successes, reward_sum, created_at, updated_at
  FROM local_nodes_v4 ORDER BY rowid;
INSERT INTO local_evidence (id, namespace, local_id, task_id, candidate_id, reward, outcome,
                            note, created_at)
  SELECT id, 'default', local_id, task_id, candidate_id, reward, outcome, note, created_at
  FROM local_evidence_v4 ORDER BY id;
INSERT INTO edges (rowid, namespace, from_id, to_id, when_text, rationale, risks, n,
                   reward_sum, created_at, updated_at)
  SELECT rowid, 'default', from_id, to_id, when_text, rationale, risks, n, reward_sum,
         created_at, updated_at
  FROM edges_v4 ORDER BY rowid;

DROP TABLE local_evidence_v4;
DROP TABLE edges_v4;
DROP TABLE local_nodes_v4;
DROP TABLE global_nodes_v4;

-- 'seeded' (memory_meta) keeps meaning the default namespace: the one the server seeds.
