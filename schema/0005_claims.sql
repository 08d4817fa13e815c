-- Migration 5: a claim names the server instance that holds it and carries a lease.
-- (Number 4 is taken by another branch's migration; numbers only need to increase.)
--
-- claim_instance is the instance id of the holding server ("<host>:<pid>:<random>",
-- store/claims.c); claim_expires_ms is the lease's end in Unix milliseconds, which the
-- holder renews while it lives. A server releases at start-up only the claims of its
-- own host (it holds the data directory's lock, so their processes are gone) and the
-- claims whose lease expired; a claim of a live server elsewhere stays its own.
ALTER TABLE tasks ADD COLUMN claim_instance TEXT;
ALTER TABLE tasks ADD COLUMN claim_expires_ms INTEGER;
