-- Migration 5 for PostgreSQL (the pair of schema/0005_claims.sql): claim owners and leases.
ALTER TABLE tasks ADD COLUMN claim_instance TEXT;
ALTER TABLE tasks ADD COLUMN claim_expires_ms BIGINT;
