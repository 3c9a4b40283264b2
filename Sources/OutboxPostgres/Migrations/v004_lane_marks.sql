-- Schema version 4: what a holder took ahead is marked on its lane, not on each operation.
-- A holder counts an attempt before it is sent, so that after a crash the next attempt carries
-- a higher Outbox-Attempt number than any sent before (SPEC §4). Each look ahead used to add
-- one to the attempts of every operation it took, rewriting each whole row (its body too) once
-- more per delivery. Now it records on the lane's row how far in the lane's order it took
-- (the rank and seq of the last operation taken, in `lane_rank DESC, seq` order); the claim
-- that takes a lapsed lane over adds the attempt to every unfinished operation up to that mark
-- before anything is sent again, and a claim or a clean release starts the mark afresh. An
-- operation sorted before the mark after it was set (a higher priority added later) gets an
-- attempt it never had at a takeover: a number too high, never one too low.
ALTER TABLE lanes ADD COLUMN taken_rank smallint;
ALTER TABLE lanes ADD COLUMN taken_seq bigint;

-- Full pages again: version 3 left half of each page free so that counting an attempt (a row
-- written again before it is sent) was a HOT update. No look ahead writes a row any more, and
-- the outcome that finishes an operation changes indexed columns (never HOT), so the room only
-- doubled the table and the pages each drain reads and dirties. Pages written from now on are
-- filled; those written before keep their room until their rows are gone.
ALTER TABLE operations SET (fillfactor = 100);
