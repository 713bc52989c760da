-- State rows whose updates are HOT (docs/performance.md#hot-state-rows). The claim found a
-- group's pending partitions through an index of consumer_state on head_at, and leases
-- through one on lease_id; every claim and every ack moves one of them, so every update of a
-- state row wrote a new entry into each of the table's indexes (its primary key too), and
-- left the old ones for vacuum. Those two indexes now live in two narrow tables of their
-- own, which the state rows' triggers keep (functions/keep_consumer_index): a row per
-- (partition, group) with something pending, keyed by its head_at, and a row per leased
-- (partition, group), keyed by its lease. Their keys are never updated: a moved head or a
-- new lease is a row deleted and a row inserted under a key of its own. consumer_state keeps
-- only indexes on columns that never change, and room on its pages for new versions.
CREATE TABLE queen.consumer_heads (
    queue_id       uuid NOT NULL,
    consumer_group text NOT NULL,
    head_at        timestamptz NOT NULL,
    partition_id   uuid NOT NULL,
    -- Not claimable before this time: the row's live lease or retryDelay (the later of its
    -- lease_expires_at and not_before; NULL: neither). The claim skips such rows without
    -- reading their state rows, which a held xmin makes long to read; not indexed, so the
    -- claims and acks that change it update this row HOT.
    not_until      timestamptz,
    PRIMARY KEY (queue_id, consumer_group, head_at, partition_id)
);

CREATE TABLE queen.consumer_leases (
    lease_id       uuid NOT NULL,
    partition_id   uuid NOT NULL,
    consumer_group text NOT NULL,
    PRIMARY KEY (lease_id, partition_id, consumer_group)
);

-- Filled by the trigger's install (triggers/consumer_index_moved), in the transaction that
-- creates it: rows written between this migration and that install are mirrored too.
DROP INDEX queen.consumer_state_pending;
DROP INDEX queen.consumer_state_lease;
-- A group's rows, for the routes that read them (unchanging columns: no update touches it).
CREATE INDEX consumer_state_group ON queen.consumer_state (queue_id, consumer_group);
-- A HOT update needs room on the row's own page (existing pages get it as they are rewritten).
ALTER TABLE queen.consumer_state SET (fillfactor = 50);
