-- Migration 3: what the optimization loop persists to resume a task after a restart.

-- The evaluator's profile of a task (docs/architecture.md, "Profile"), written once before step 1.
ALTER TABLE tasks ADD COLUMN profile TEXT CHECK (profile IS NULL OR json_valid(profile));

-- AdaExplore tree nodes of a task (engine/tree.c rows). node_id 0 is the root (the
-- reference); a step adds one node and rewrites the rows of its ancestors' statistics.
CREATE TABLE tree_nodes (
  task_id TEXT    NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
  node_id INTEGER NOT NULL CHECK (node_id >= 0),
  data    TEXT    NOT NULL CHECK (json_valid(data)),
  PRIMARY KEY (task_id, node_id)
) WITHOUT ROWID;
