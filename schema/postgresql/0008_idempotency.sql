-- Migration 8 for PostgreSQL (the pair of schema/0008_idempotency.sql): idempotency keys.
CREATE TABLE idempotency_keys (
  key        TEXT    PRIMARY KEY,
  digest     TEXT    NOT NULL CHECK (length(digest) = 64),
  task_id    TEXT    NOT NULL,
  created_ms BIGINT  NOT NULL
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_ms);
