-- Schema version 5: the mark of what a holder took ahead (version 4) also keeps the latest
-- arrival taken. An operation that arrived after it (a higher priority added later sorts before
-- the mark) was never taken, and a takeover leaves its attempt count alone: a lane that takes a
-- flood of urgent writes after its holder's last look is not rewritten whole by the claim that
-- takes it over. What can still be counted without being sent (one sorted before the mark that
-- waited on its dependency) gets a number too high, never one too low. A mark written before
-- this version has none: a takeover of it counts by rank and seq alone, as version 4 did.
ALTER TABLE lanes ADD COLUMN taken_max_seq bigint;
