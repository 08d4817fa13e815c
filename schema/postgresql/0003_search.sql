-- Migration 3 for PostgreSQL (the pair of schema/0003_search.sql): the task profile and
-- the search tree rows.
ALTER TABLE tasks ADD COLUMN profile TEXT CHECK (profile IS NULL OR json_valid(profile));

CREATE TABLE tree_nodes (
  task_id TEXT    NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
  node_id BIGINT  NOT NULL CHECK (node_id >= 0),
  data    TEXT    NOT NULL CHECK (json_valid(data)),
  PRIMARY KEY (task_id, node_id)
);
