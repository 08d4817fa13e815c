-- Migration 6 for PostgreSQL (the pair of schema/0006_memory_namespaces.sql): memory
-- namespaces. PostgreSQL changes keys in place, so the tables are altered, not rebuilt:
-- every row gains the namespace 'default', and the keys and references gain the
-- namespace.
CREATE TABLE memory_namespaces (
  rowid      BIGSERIAL,
  name       TEXT PRIMARY KEY,
  origin     TEXT NOT NULL,
  created_at TEXT NOT NULL
);
INSERT INTO memory_namespaces (name, origin, created_at)
  VALUES ('default', 'seed', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'));

ALTER TABLE local_evidence DROP CONSTRAINT local_evidence_local_id_fkey;
ALTER TABLE edges DROP CONSTRAINT edges_from_id_fkey;
ALTER TABLE edges DROP CONSTRAINT edges_to_id_fkey;
ALTER TABLE local_nodes DROP CONSTRAINT local_nodes_global_id_fkey;

ALTER TABLE global_nodes ADD COLUMN namespace TEXT NOT NULL DEFAULT 'default'
  REFERENCES memory_namespaces (name);
ALTER TABLE global_nodes ALTER COLUMN namespace DROP DEFAULT;
ALTER TABLE global_nodes DROP CONSTRAINT global_nodes_pkey;
ALTER TABLE global_nodes ADD PRIMARY KEY (namespace, id);

ALTER TABLE local_nodes ADD COLUMN namespace TEXT NOT NULL DEFAULT 'default';
ALTER TABLE local_nodes ALTER COLUMN namespace DROP DEFAULT;
ALTER TABLE local_nodes DROP CONSTRAINT local_nodes_pkey;
ALTER TABLE local_nodes ADD PRIMARY KEY (namespace, id);
ALTER TABLE local_nodes ADD FOREIGN KEY (namespace, global_id)
  REFERENCES global_nodes (namespace, id);
DROP INDEX local_nodes_global;
CREATE INDEX local_nodes_global ON local_nodes (namespace, global_id);

ALTER TABLE local_evidence ADD COLUMN namespace TEXT NOT NULL DEFAULT 'default';
ALTER TABLE local_evidence ALTER COLUMN namespace DROP DEFAULT;
ALTER TABLE local_evidence ADD FOREIGN KEY (namespace, local_id)
  REFERENCES local_nodes (namespace, id);
DROP INDEX local_evidence_local;
CREATE INDEX local_evidence_local ON local_evidence (namespace, local_id, id);

ALTER TABLE edges ADD COLUMN namespace TEXT NOT NULL DEFAULT 'default';
ALTER TABLE edges ALTER COLUMN namespace DROP DEFAULT;
ALTER TABLE edges DROP CONSTRAINT edges_pkey;
ALTER TABLE edges ADD PRIMARY KEY (namespace, from_id, to_id);
ALTER TABLE edges ADD FOREIGN KEY (namespace, from_id) REFERENCES global_nodes (namespace, id);
ALTER TABLE edges ADD FOREIGN KEY (namespace, to_id) REFERENCES global_nodes (namespace, id);
DROP INDEX edges_to;
CREATE INDEX edges_to ON edges (namespace, to_id);
