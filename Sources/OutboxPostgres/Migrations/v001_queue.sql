-- Outbox's shared queue, schema version 1 (SPEC §9). PostgresSchema applies it in one
-- transaction with search_path set to the schema Outbox owns, so no name here is qualified.
-- Times are milliseconds since the epoch, as the local log keeps them; lease times are the
-- database's own clock, so the instances' clocks never have to agree.

-- One row per operation, with its request and its latest state. seq is arrival order: first in,
-- first out within a priority, and the cursor of listings.
CREATE TABLE operations (
    seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              uuid NOT NULL UNIQUE,
    origin          text NOT NULL,
    -- The ordering key; '' is the origin's default lane (a key is 1–255 visible characters,
    -- so it is never empty).
    lane            text NOT NULL,
    idempotency_key text NOT NULL,
    fingerprint     bytea NOT NULL,
    credentials     bytea NOT NULL,
    method          text NOT NULL,
    target          text NOT NULL,
    -- As sent upstream on every attempt: a JSON array of [name, value] pairs, in order.
    headers         jsonb NOT NULL,
    body            bytea NOT NULL,
    priority        smallint NOT NULL CHECK (priority BETWEEN 0 AND 3),
    tag             text,
    depends_on      uuid,
    created_at      bigint NOT NULL,
    status          text NOT NULL CHECK (status IN ('pending', 'inProgress', 'completed', 'failed', 'conflict')),
    -- Where the operation stands in its lane, higher first: written by the queue's one rule
    -- (an attempted operation stays the head; priority orders only the rest).
    lane_rank       smallint NOT NULL,
    attempts        integer NOT NULL DEFAULT 0,
    retry_count     integer NOT NULL DEFAULT 0,
    last_attempt_at bigint,
    next_attempt_at bigint,
    last_error      text,
    -- The upstream's answer once completed (response_*) or in conflict (conflict_*): status,
    -- headers as a JSON array of [name, value] pairs, the body, or the length of a body too
    -- long to keep (SPEC §4).
    response_status   integer,
    response_headers  jsonb,
    response_body     bytea,
    response_omitted  bigint,
    conflict_status   integer,
    conflict_headers  jsonb,
    conflict_body     bytea,
    conflict_omitted  bigint,
    -- The instance that made the last attempt (null before any).
    instance        text,
    finished_at     bigint
);

-- A key is one operation per origin, whichever instance received it: the loser of a race
-- finds the winner's row.
CREATE UNIQUE INDEX operations_key ON operations (origin, idempotency_key);
-- The next operation of a lane: the first row of this index for (origin, lane).
CREATE INDEX operations_lane_next ON operations (origin, lane, lane_rank DESC, seq)
    WHERE status IN ('pending', 'inProgress');
-- Listings by status, in arrival order; also expiry (ttlSeconds), which walks the unfinished
-- oldest first and stops at the first one young enough. Every index costs each add an
-- insertion, so there is no index on created_at of its own.
CREATE INDEX operations_status ON operations (status, seq);
-- Retention of finished operations (completedRetentionSeconds): only finished rows are in it.
CREATE INDEX operations_finished_at ON operations (finished_at) WHERE finished_at IS NOT NULL;

-- One row per lane that has or had unfinished work, and who delivers it (PostgresLanes).
-- unfinished counts the lane's pending and inProgress operations, changed in the transaction
-- that adds or finishes one, under the row's lock: a lane is claimed only while it has work,
-- and its row is removed only when the count is 0 after every transaction adding to it.
-- A claim sets holder (a token unique to one run of one instance) and lease_until, and takes a
-- new fence from lane_fences; every write made under a claim names the fence, so an instance
-- whose claim lapsed and was taken over changes nothing any more. The sequence is shared so a
-- lane's row, removed and made again, never hands out a fence it gave before.
CREATE SEQUENCE lane_fences;
CREATE TABLE lanes (
    origin      text NOT NULL,
    lane        text NOT NULL,
    unfinished  bigint NOT NULL DEFAULT 0 CHECK (unfinished >= 0),
    holder      text,
    fence       bigint NOT NULL DEFAULT 0,
    lease_until timestamptz,
    PRIMARY KEY (origin, lane)
);
-- The lanes of an origin an instance may claim: with work, and no live lease.
CREATE INDEX lanes_with_work ON lanes (origin, lease_until) WHERE unfinished > 0;
