-- Migration 7: the skill memory (AdaExplore; docs/architecture.md, "Skill memory"): rules
-- learned from recurring failures, and the failures they came from.
--
-- A rule is one sentence, "You cannot <minimal prohibited action>.", with a score (how
-- often it was confirmed), the op family it applies to (NULL: every family), whether it is
-- enabled, and an optional builtin constraint (JSON; store/skills_validate.c checks its
-- vocabulary) that the builtin proposer applies before it compiles. origin says what made
-- it: 'grouping' (failures of one normalized signature on 3 tasks, no LLM), 'llm' (the
-- extraction and dedup prompts), 'user' (the API) or 'import'. signature is the grouping
-- key of a 'grouping' rule (one rule per signature and family), NULL otherwise. refusals
-- counts the proposals the builtin refused because of the constraint.
CREATE TABLE skills (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  rule            TEXT    NOT NULL,
  score           INTEGER NOT NULL DEFAULT 1 CHECK (score >= 0),
  family          TEXT,
  enabled         INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
  constraint_json TEXT    CHECK (constraint_json IS NULL OR json_valid(constraint_json)),
  origin          TEXT    NOT NULL CHECK (origin IN ('grouping', 'llm', 'user', 'import')),
  signature       TEXT,
  refusals        INTEGER NOT NULL DEFAULT 0 CHECK (refusals >= 0),
  created_at      TEXT    NOT NULL,
  updated_at      TEXT    NOT NULL
);
CREATE UNIQUE INDEX skills_signature ON skills (signature, family) WHERE signature IS NOT NULL;

-- One failure each. skill_id is the rule it supports; without one, in_group says whether it
-- waits in its group (signature, family) for the group to reach 3 tasks, or was examined
-- and gave no rule (the extraction prompt answered "no guidance"). A candidate is examined once
-- (candidate_id unique), so a pass over finished tasks never counts a failure twice.
-- task_id and candidate_id are not foreign keys: a rule outlives the tasks it came from.
-- knobs (the candidate's -D knobs), moved (the knob its strategy moved) and features (the
-- region's shape facts, store/skills_validate.h) feed the builtin constraint of a grouped
-- rule; the API does not show them.
CREATE TABLE skill_examples (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  skill_id     INTEGER REFERENCES skills (id) ON DELETE CASCADE,
  task_id      TEXT,
  candidate_id TEXT,
  family       TEXT,
  class        TEXT    NOT NULL,
  signature    TEXT    NOT NULL,
  message      TEXT    NOT NULL DEFAULT '',
  in_group     INTEGER NOT NULL DEFAULT 0 CHECK (in_group IN (0, 1)),
  knobs        TEXT    CHECK (knobs IS NULL OR json_valid(knobs)),
  moved        TEXT,
  features     TEXT    CHECK (features IS NULL OR json_valid(features)),
  created_at   TEXT    NOT NULL
);
CREATE INDEX skill_examples_skill ON skill_examples (skill_id, id);
CREATE INDEX skill_examples_group ON skill_examples (signature, family, task_id)
  WHERE skill_id IS NULL AND in_group = 1;
CREATE UNIQUE INDEX skill_examples_candidate ON skill_examples (candidate_id)
  WHERE candidate_id IS NOT NULL;
