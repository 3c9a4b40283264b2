-- Schema version 2: telling a lane's holder that its operations changed under it (SPEC §9).
-- An admin write from any instance (retry, delete, prune, flush) bumps the lane's poke; the
-- holder looks for lanes whose poke moved past what it has seen (every tenth of a second), reads
-- them again, cancels what was removed, and records the poke it has seen. An instance that
-- removed an operation from a lane another instance holds waits for that acknowledgement
-- before it answers, so an operation reported removed is never sent afterwards.
ALTER TABLE lanes ADD COLUMN poke bigint NOT NULL DEFAULT 0;
ALTER TABLE lanes ADD COLUMN seen_poke bigint NOT NULL DEFAULT 0;
-- The lanes one holder delivers: renewals and the holder's look for pokes.
CREATE INDEX lanes_holder ON lanes (holder) WHERE holder IS NOT NULL;
