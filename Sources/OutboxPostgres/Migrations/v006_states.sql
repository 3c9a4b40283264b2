-- Schema version 6: an operation's request and its state in two tables. The request (headers,
-- body, key) never changes once stored; the state changes at every outcome. In one row, each
-- outcome wrote a new version of the whole row, body included (1.4 KB for a 1 KiB request, and
-- as much again in WAL), and an entry in each of its five indexes. Now `requests` keeps what
-- never changes and `states` the rest: an outcome writes a row of about 150 bytes and the three
-- indexes of `states`. Adding an operation writes two rows, which costs no more than one
-- (measured: each table and its indexes are narrower). The view `operations` joins them back,
-- so reads still see one row per operation; writes name the table they change.

ALTER TABLE operations RENAME TO requests;
ALTER INDEX operations_pkey RENAME TO requests_pkey;
ALTER INDEX operations_id_key RENAME TO requests_id_key;
ALTER INDEX operations_key RENAME TO requests_key;
ALTER TABLE requests RENAME CONSTRAINT operations_priority_check TO requests_priority_check;

-- One row per operation, written by the queue's rules as it is tried (columns as version 1 had
-- them in `operations`), under the request's seq; its lane is a copy of the request's, for the
-- lane's order. An operation's id finds its state through `requests`.
CREATE TABLE states (
    seq             bigint PRIMARY KEY,
    origin          text NOT NULL,
    lane            text NOT NULL,
    status          text NOT NULL CHECK (status IN ('pending', 'inProgress', 'completed', 'failed', 'conflict')),
    lane_rank       smallint NOT NULL,
    attempts        integer NOT NULL DEFAULT 0,
    retry_count     integer NOT NULL DEFAULT 0,
    last_attempt_at bigint,
    next_attempt_at bigint,
    last_error      text,
    instance        text,
    finished_at     bigint,
    response_status   integer,
    response_headers  jsonb,
    response_body     bytea,
    response_omitted  bigint,
    conflict_status   integer,
    conflict_headers  jsonb,
    conflict_body     bytea,
    conflict_omitted  bigint
);

INSERT INTO states (seq, origin, lane, status, lane_rank, attempts, retry_count, last_attempt_at, next_attempt_at,
                    last_error, instance, finished_at, response_status, response_headers, response_body, response_omitted,
                    conflict_status, conflict_headers, conflict_body, conflict_omitted)
SELECT seq, origin, lane, status, lane_rank, attempts, retry_count, last_attempt_at, next_attempt_at,
       last_error, instance, finished_at, response_status, response_headers, response_body, response_omitted,
       conflict_status, conflict_headers, conflict_body, conflict_omitted
  FROM requests;

DROP TRIGGER operations_counted_on_insert ON requests;
DROP TRIGGER operations_counted_on_update ON requests;
DROP TRIGGER operations_counted_on_delete ON requests;
-- Dropping the columns drops the indexes on them (the lane's next, by status, finished_at).
ALTER TABLE requests DROP COLUMN status, DROP COLUMN lane_rank, DROP COLUMN attempts, DROP COLUMN retry_count,
    DROP COLUMN last_attempt_at, DROP COLUMN next_attempt_at, DROP COLUMN last_error, DROP COLUMN instance,
    DROP COLUMN finished_at, DROP COLUMN response_status, DROP COLUMN response_headers, DROP COLUMN response_body,
    DROP COLUMN response_omitted, DROP COLUMN conflict_status, DROP COLUMN conflict_headers, DROP COLUMN conflict_body,
    DROP COLUMN conflict_omitted;

-- The indexes of version 1, on the table whose columns they order.
CREATE INDEX states_lane_next ON states (origin, lane, lane_rank DESC, seq) WHERE status IN ('pending', 'inProgress');
CREATE INDEX states_status ON states (status, seq);
CREATE INDEX states_finished_at ON states (finished_at) WHERE finished_at IS NOT NULL;

-- The counts by status (version 3) follow the table that holds the status; they do not change.
CREATE TRIGGER states_counted_on_insert AFTER INSERT ON states
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION count_statuses();
CREATE TRIGGER states_counted_on_update AFTER UPDATE ON states
    REFERENCING OLD TABLE AS removed NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION count_statuses();
CREATE TRIGGER states_counted_on_delete AFTER DELETE ON states
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION count_statuses();

-- Joined on seq: the planner knows each side's seq is the other's, so a listing by status walks
-- `states_status` in seq order and fetches each request by its key, and a listing of every
-- operation walks `requests` by its key and fetches each state by its own.
CREATE VIEW operations AS
SELECT s.seq, r.id, r.origin, r.lane, r.idempotency_key, r.fingerprint, r.credentials, r.method, r.target, r.headers,
       r.body, r.priority, r.tag, r.depends_on, r.created_at, s.status, s.lane_rank, s.attempts, s.retry_count,
       s.last_attempt_at, s.next_attempt_at, s.last_error, s.response_status, s.response_headers, s.response_body,
       s.response_omitted, s.conflict_status, s.conflict_headers, s.conflict_body, s.conflict_omitted, s.instance,
       s.finished_at
  FROM requests r JOIN states s ON s.seq = r.seq;
