-- Migration 7 for PostgreSQL (the pair of schema/0007_skills.sql): the skill memory.
CREATE SEQUENCE skills_id_seq;
CREATE TABLE skills (
  id              BIGINT  PRIMARY KEY,
  rule            TEXT    NOT NULL,
  score           BIGINT  NOT NULL DEFAULT 1 CHECK (score >= 0),
  family          TEXT,
  enabled         BIGINT  NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
  constraint_json TEXT    CHECK (constraint_json IS NULL OR json_valid(constraint_json)),
  origin          TEXT    NOT NULL CHECK (origin IN ('grouping', 'llm', 'user', 'import')),
  signature       TEXT,
  refusals        BIGINT  NOT NULL DEFAULT 0 CHECK (refusals >= 0),
  created_at      TEXT    NOT NULL,
  updated_at      TEXT    NOT NULL
);
CREATE TRIGGER skills_id BEFORE INSERT ON skills
  FOR EACH ROW EXECUTE FUNCTION opforge_rowid('id', 'skills_id_seq');
-- SQLite treats NULLs as distinct in a unique index, and so does PostgreSQL by default.
CREATE UNIQUE INDEX skills_signature ON skills (signature, family) WHERE signature IS NOT NULL;

CREATE SEQUENCE skill_examples_id_seq;
CREATE TABLE skill_examples (
  id           BIGINT  PRIMARY KEY,
  skill_id     BIGINT  REFERENCES skills (id) ON DELETE CASCADE,
  task_id      TEXT,
  candidate_id TEXT,
  family       TEXT,
  class        TEXT    NOT NULL,
  signature    TEXT    NOT NULL,
  message      TEXT    NOT NULL DEFAULT '',
  in_group     BIGINT  NOT NULL DEFAULT 0 CHECK (in_group IN (0, 1)),
  knobs        TEXT    CHECK (knobs IS NULL OR json_valid(knobs)),
  moved        TEXT,
  features     TEXT    CHECK (features IS NULL OR json_valid(features)),
  created_at   TEXT    NOT NULL
);
CREATE TRIGGER skill_examples_id BEFORE INSERT ON skill_examples
  FOR EACH ROW EXECUTE FUNCTION opforge_rowid('id', 'skill_examples_id_seq');
CREATE INDEX skill_examples_skill ON skill_examples (skill_id, id);
CREATE INDEX skill_examples_group ON skill_examples (signature, family, task_id)
  WHERE skill_id IS NULL AND in_group = 1;
CREATE UNIQUE INDEX skill_examples_candidate ON skill_examples (candidate_id)
  WHERE candidate_id IS NOT NULL;
