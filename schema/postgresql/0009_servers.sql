-- Migration 9 for PostgreSQL (the pair of schema/0009_servers.sql): the servers that
-- share the store, and the device class a task asks for.
CREATE TABLE servers (
  instance   TEXT    PRIMARY KEY,
  host       TEXT    NOT NULL,
  data_dir   TEXT    NOT NULL DEFAULT '',
  pid        BIGINT  NOT NULL,
  version    TEXT    NOT NULL,
  devices    TEXT    NOT NULL DEFAULT ',',
  gpus       TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(gpus)),
  slots      BIGINT  NOT NULL DEFAULT 0 CHECK (slots >= 0),
  started_at TEXT    NOT NULL,
  renewed_ms BIGINT  NOT NULL
);

ALTER TABLE tasks ADD COLUMN device TEXT;

-- instr(haystack, needle): SQLite's, with which a claim matches a task's device class.
CREATE FUNCTION instr(haystack text, needle text) RETURNS integer LANGUAGE sql IMMUTABLE AS $$
  SELECT strpos(haystack, needle)
$$;

-- Servers waiting for work hear of it here (LISTEN opforge_queue; the payload is the task
-- id): a task queued, or one let go by its server (released on a stop) so that another
-- takes it over at once.
CREATE FUNCTION opforge_queue_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.claimed_by IS NULL AND NEW.status IN ('queued', 'running') THEN
    PERFORM pg_notify('opforge_queue', NEW.id);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER tasks_queue_notify AFTER INSERT OR UPDATE OF claimed_by, status ON tasks
  FOR EACH ROW EXECUTE FUNCTION opforge_queue_notify();
