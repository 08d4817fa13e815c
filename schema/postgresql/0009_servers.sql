-- Migration 9 for PostgreSQL (the pair of schema/0009_servers.sql): the servers that
-- share the store, and the device class a task asks for.
CREATE TABLE servers (
  instance   TEXT    PRIMARY KEY,
  host       TEXT    NOT NULL,
  pid        BIGINT  NOT NULL,
  version    TEXT    NOT NULL,
  devices    TEXT    NOT NULL DEFAULT ',',
  gpus       TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(gpus)),
  slots      BIGINT  NOT NULL DEFAULT 0 CHECK (slots >= 0),
  started_at TEXT    NOT NULL,
  renewed_ms BIGINT  NOT NULL
);

ALTER TABLE tasks ADD COLUMN device TEXT;
