-- Programs (docs/architecture.md, "Programs"): a candidate made of library steps and
-- generated regions keeps its steps here instead of one source and plan; region is the
-- region a step changed (NULL for the reference, a whole-task candidate, and the first
-- step, which sets every region).
ALTER TABLE candidates ADD COLUMN program TEXT CHECK (program IS NULL OR json_valid(program));
ALTER TABLE candidates ADD COLUMN region INTEGER;
