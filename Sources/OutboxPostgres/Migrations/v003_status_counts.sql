-- Schema version 3: cheaper writes. First, the number of operations in each status, kept as
-- the statements that change them run, so that /admin/status, the dashboard and maxOperations
-- read a few rows instead of counting the table (a scan of a million rows at every poll).
-- Each backend adds its statements' changes to rows of its own slot (its process id modulo 16),
-- so that writers of different connections and instances do not wait on one hot row; a count is
-- the sum over the slots. Statement-level triggers see every change, whichever statement and
-- instance made it: the rule lives in one place, under the queue's own statements.
CREATE TABLE status_counts (
    slot   smallint NOT NULL,
    status text NOT NULL,
    n      bigint NOT NULL,
    PRIMARY KEY (slot, status)
);
INSERT INTO status_counts (slot, status, n) SELECT 0, status, count(*) FROM operations GROUP BY status;

-- Its search_path is the schema's, whatever the session that changes operations has.
CREATE FUNCTION count_statuses() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO status_counts AS c (slot, status, n)
        SELECT pg_backend_pid() % 16, status, count(*) FROM added GROUP BY status
        ON CONFLICT (slot, status) DO UPDATE SET n = c.n + EXCLUDED.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO status_counts AS c (slot, status, n)
        SELECT pg_backend_pid() % 16, status, -count(*) FROM removed GROUP BY status
        ON CONFLICT (slot, status) DO UPDATE SET n = c.n + EXCLUDED.n;
    ELSE
        INSERT INTO status_counts AS c (slot, status, n)
        SELECT pg_backend_pid() % 16, status, sum(change)
          FROM (SELECT status, 1 AS change FROM added UNION ALL SELECT status, -1 FROM removed) changes
         GROUP BY status HAVING sum(change) <> 0
        ON CONFLICT (slot, status) DO UPDATE SET n = c.n + EXCLUDED.n;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER operations_counted_on_insert AFTER INSERT ON operations
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION count_statuses();
CREATE TRIGGER operations_counted_on_update AFTER UPDATE ON operations
    REFERENCING OLD TABLE AS removed NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION count_statuses();
CREATE TRIGGER operations_counted_on_delete AFTER DELETE ON operations
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION count_statuses();

-- Room in each page for a row's next version: an attempt counted before sending changes no
-- indexed column, so with room on its page the update is a HOT one, which writes no index.
ALTER TABLE operations SET (fillfactor = 50);

-- A lane's row is written by every transaction that adds to the lane or finishes its
-- operations. An index whose predicate names `unfinished` made each of those writes a new
-- entry in every index of lanes (not a HOT update), and until vacuum came each look-up of the
-- lane by its key walked past all of them: the claim's index now covers every lane (a lane's
-- row is removed once it has no work), and the pages keep room for the row's next version.
DROP INDEX lanes_with_work;
CREATE INDEX lanes_with_work ON lanes (origin, lease_until);
ALTER TABLE lanes SET (fillfactor = 50);
