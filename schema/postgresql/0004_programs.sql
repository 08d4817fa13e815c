-- Migration 4 for PostgreSQL (the pair of schema/0004_programs.sql): programs.
ALTER TABLE candidates ADD COLUMN program TEXT CHECK (program IS NULL OR json_valid(program));
ALTER TABLE candidates ADD COLUMN region BIGINT;
