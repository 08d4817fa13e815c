-- Migration 9: the servers that share the store, and the device class a task asks for
-- (docs/architecture.md, "Store backends").
--
-- A server writes its row at start, renews renewed_ms with its claims' leases, and
-- deletes it when it stops; a row not renewed for a lease is a server that is gone.
-- devices lists the device classes its GPUs advertise, each between commas (",H200,"),
-- so that a claim matches a task's class with one instr() on either backend; gpus is what
-- GET /v1/servers shows of them. data_dir is the --data directory whose lock the server
-- held: a server started later on the same host and directory knows that one is gone
-- and takes its tasks back at once, without waiting for their leases.
CREATE TABLE servers (
  instance   TEXT    PRIMARY KEY,
  host       TEXT    NOT NULL,
  data_dir   TEXT    NOT NULL DEFAULT '',
  pid        INTEGER NOT NULL,
  version    TEXT    NOT NULL,
  devices    TEXT    NOT NULL DEFAULT ',',
  gpus       TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(gpus)),
  slots      INTEGER NOT NULL DEFAULT 0 CHECK (slots >= 0),
  started_at TEXT    NOT NULL,
  renewed_ms INTEGER NOT NULL
);

-- NULL: any device. Otherwise only a server whose devices name it claims the task.
ALTER TABLE tasks ADD COLUMN device TEXT;
