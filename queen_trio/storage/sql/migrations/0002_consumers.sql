-- Consumer groups: who joined a queue and from when, and per (partition, group) the cursor,
-- the lease and the retry counter. A queue-mode consumer is the group '__QUEUE_MODE__'.

CREATE TABLE queen.subscriptions (
    queue_id       uuid NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    consumer_group text NOT NULL,
    -- Messages committed at or after start_at are delivered; NULL: from the beginning.
    start_at       timestamptz,
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (queue_id, consumer_group)
);

-- One row per (partition, group) of every subscribed group, created when the group joins
-- (for the partitions that exist) and when a push creates a partition (for the groups that
-- exist); both take the queue row's lock, so neither can miss the other.
CREATE TABLE queen.consumer_state (
    partition_id     uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    consumer_group   text NOT NULL,
    queue_id         uuid NOT NULL,
    start_at         timestamptz,
    -- Every offset below the cursor is settled (completed or dead-lettered) for the group.
    cursor_offset    bigint NOT NULL,
    -- Commit time of the message at the cursor; NULL when the group is caught up. Pushes set
    -- it under this row's lock, consumers recompute it under the same lock.
    head_at          timestamptz,
    lease_id         uuid,
    lease_expires_at timestamptz,
    -- The leased delivery covers offsets [cursor_offset, delivered_until).
    delivered_until  bigint,
    -- Failed deliveries since the cursor last moved (nacks and expired leases).
    retry_count      integer NOT NULL DEFAULT 0,
    -- After a nack on a queue with retryDelay: not claimable before this time.
    not_before       timestamptz,
    PRIMARY KEY (partition_id, consumer_group)
);
-- The claim: a group's partitions with something pending, oldest pending first.
CREATE INDEX consumer_state_pending ON queen.consumer_state (queue_id, consumer_group, head_at)
    WHERE head_at IS NOT NULL;
CREATE INDEX consumer_state_lease ON queen.consumer_state (lease_id) WHERE lease_id IS NOT NULL;

-- Dead letters are per group, and keep their own copy of the frame, so that retention of the
-- segment never empties them.
CREATE TABLE queen.dead_letters (
    id                 bigserial PRIMARY KEY,
    queue_id           uuid NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    partition_id       uuid NOT NULL,
    partition_name     text NOT NULL,
    consumer_group     text NOT NULL,
    message_offset     bigint NOT NULL,
    message_id         uuid NOT NULL,
    transaction_id     text NOT NULL,
    frame              bytea NOT NULL,
    message_created_at timestamptz NOT NULL,
    error_message      text,
    retry_count        integer NOT NULL,
    failed_at          timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX dead_letters_by_queue ON queen.dead_letters (queue_id, consumer_group, failed_at DESC);
