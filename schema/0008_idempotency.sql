-- Migration 8: idempotency keys of task submissions (POST /v1/tasks with an
-- Idempotency-Key header; docs/architecture.md, "API"). A key names the submission it
-- was first sent with (the SHA-256 of the body's canonical JSON, hex) and the task that
-- submission made. For 24 hours the same key with the same body answers that task again
-- and the same key with another body is refused; after that the key is free again, and
-- expired rows are pruned whenever a key is stored.
--
-- task_id is not a foreign key: a task is deleted without its keys (store/tasks_state.c
-- does not rely on the foreign_keys pragma), and a key whose task is gone counts as free.
CREATE TABLE idempotency_keys (
  key        TEXT    PRIMARY KEY,
  digest     TEXT    NOT NULL CHECK (length(digest) = 64),
  task_id    TEXT    NOT NULL,
  created_ms INTEGER NOT NULL
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_ms);
