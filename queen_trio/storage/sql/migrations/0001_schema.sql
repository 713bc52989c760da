-- Queues, partitions, segments and the transaction index.
-- Offsets are internal: producers never see them, consumers only through cursors.

CREATE TABLE queen.queues (
    id                          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name                        text NOT NULL UNIQUE,
    namespace                   text NOT NULL DEFAULT '',
    task                        text NOT NULL DEFAULT '',
    -- Options sent through /configure (the merge base); effective values are the columns below.
    explicit_options            jsonb NOT NULL DEFAULT '{}'::jsonb,
    configured                  boolean NOT NULL DEFAULT false,
    -- Column defaults are the options of a queue created implicitly by a push
    -- (queen_trio.options.QueueOptions.implicit() must agree; a test checks it).
    lease_time                  integer NOT NULL DEFAULT 60,
    retry_limit                 integer NOT NULL DEFAULT 3,
    retry_delay                 integer NOT NULL DEFAULT 0,
    max_size                    integer NOT NULL DEFAULT 0,
    ttl                         integer NOT NULL DEFAULT 3600,
    dead_letter_queue           boolean NOT NULL DEFAULT true,
    dlq_after_max_retries       boolean NOT NULL DEFAULT false,
    delayed_processing          integer NOT NULL DEFAULT 0,
    window_buffer               integer NOT NULL DEFAULT 0,
    retention_seconds           integer NOT NULL DEFAULT 0,
    completed_retention_seconds integer NOT NULL DEFAULT 0,
    retention_enabled           boolean NOT NULL DEFAULT false,
    encryption_enabled          boolean NOT NULL DEFAULT false,
    max_wait_time_seconds       integer NOT NULL DEFAULT 0,
    priority                    integer NOT NULL DEFAULT 0,
    dedup_window_seconds        integer NOT NULL DEFAULT 3600,
    created_at                  timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at                  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX queues_namespace ON queen.queues (namespace);
CREATE INDEX queues_task ON queen.queues (task);

CREATE TABLE queen.partitions (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    queue_id       uuid NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    name           text NOT NULL,
    -- The offset the next message will take; allocated under this row's lock.
    next_offset    bigint NOT NULL DEFAULT 0,
    -- created_at of the newest segment: commit timestamps never go back (DECISIONS).
    last_commit_at timestamptz,
    last_write_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (queue_id, name)
);

-- One row per flush of a partition: `message_count` frames packed in `frames`
-- (format: queen_trio/frames.py), holding offsets first_offset .. first_offset+count-1.
-- frame_ends[i] is the byte where frame i (1-based) ends, so a pop cuts exactly the frames it
-- delivers out of a large segment.
CREATE TABLE queen.segments (
    partition_id  uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    first_offset  bigint NOT NULL,
    message_count integer NOT NULL CHECK (message_count > 0),
    created_at    timestamptz NOT NULL,
    frames        bytea NOT NULL,
    frame_ends    integer[] NOT NULL,
    PRIMARY KEY (partition_id, first_offset)
);
-- Commit times are monotone per partition: a subscription start or a retention cut finds its
-- first segment by time.
CREATE INDEX segments_partition_time ON queen.segments (partition_id, created_at);

-- (partition, transaction id) -> offset: the dedup probe, and lookups by transaction id.
-- Exact match on the text, never a hash alone. Not unique: with dedupWindowSeconds 0 a
-- transaction id may repeat. No foreign key: a per-row RI check would cost every message a
-- lookup of its partition, whose row push_bundle already holds locked; whoever deletes a
-- partition deletes its index rows (reclaim_partitions.sql).
CREATE TABLE queen.transaction_index (
    partition_id   uuid NOT NULL,
    transaction_id text NOT NULL,
    message_offset bigint NOT NULL,
    created_at     timestamptz NOT NULL,
    PRIMARY KEY (partition_id, transaction_id, message_offset)
);
