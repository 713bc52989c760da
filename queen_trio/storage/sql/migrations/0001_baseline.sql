-- The baseline: every table, index and type of queen-trio's schema, as migrations 0001 to
-- 0017 left it (squashed; docs/architecture.md, "A migration"). Functions, views and triggers
-- are not here: each has one file under storage/sql/functions|views|triggers, installed after
-- the migrations (storage/schema.py). A database whose ledger holds 0017 is recorded as at
-- this baseline without running it.
-- Offsets are internal: producers never see them, consumers only through cursors.


-- Queues, partitions, segments and the transaction index.
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
    -- created_at of the newest segment: commit timestamps never go back (docs/decisions.md).
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
    -- What the group has consumed, kept by the consumer_state_consumed trigger on every
    -- forward cursor move (acks, autoAck, dead letters, eviction); a seek is not counted.
    last_consumed_at timestamptz,
    consumed_total   bigint NOT NULL DEFAULT 0,
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
    failed_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- A retried dead letter: asked for at retry_requested_at, delivered under retry_lease_id
    -- (the group's lease on its partition) until an ack settles it; retry_expiries counts
    -- the leases that expired with it unsettled since the operator's retry.
    retry_requested_at timestamptz,
    retry_lease_id     uuid,
    retry_expiries     integer NOT NULL DEFAULT 0
);

CREATE INDEX dead_letters_by_queue ON queen.dead_letters (queue_id, consumer_group, failed_at DESC);

-- Trace events, recorded by consumers (POST /api/v1/traces) against a message, to follow a
-- flow message by message. Deleted with their partition.
CREATE TABLE queen.trace_events (
    id             uuid PRIMARY KEY,
    partition_id   uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    transaction_id text NOT NULL,
    message_offset bigint NOT NULL,
    consumer_group text NOT NULL,
    event_type     text NOT NULL,
    data           text NOT NULL,   -- the JSON text as received
    worker_id      text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX trace_events_message ON queen.trace_events (partition_id, transaction_id, created_at);

CREATE TABLE queen.trace_names (
    event_id   uuid NOT NULL REFERENCES queen.trace_events (id) ON DELETE CASCADE,
    trace_name text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (trace_name, event_id)
);

CREATE INDEX trace_names_recent ON queen.trace_names (trace_name, created_at);

-- Message ids that a spool replay committed: a record whose file outlived its commit (a crash
-- between the two) is recognised and skipped, whatever the queue's dedup window. Pruned by the
-- retention pass after a week.
CREATE TABLE queen.spool_replayed (
    message_id  uuid PRIMARY KEY,
    replayed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- What pop_claim returns for each delivered run of frames (or, with nothing claimed, one row
-- with only next_check_at), and what pop_many and pop_namespace wrap with the request or
-- queue they belong to.
CREATE TYPE queen.claim_row AS (
    partition_id   uuid,
    partition_name text,
    first_offset   bigint,
    created_at     timestamptz,
    frames         bytea,
    skip_frames    integer,
    take_frames    integer,
    next_check_at  timestamptz,
    -- Where each of its frames ends, relative to its own `frames`.
    frame_ends     integer[]
);

-- Dead letters per (partition, group), kept by statement triggers on queen.dead_letters, so a
-- count never scans the DLQ and every writer of dead letters is covered.
CREATE TABLE queen.dead_letter_counts (
    partition_id   uuid NOT NULL,
    consumer_group text NOT NULL,
    queue_id       uuid NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    dead           bigint NOT NULL,
    PRIMARY KEY (partition_id, consumer_group)
);

CREATE INDEX dead_letter_counts_queue ON queen.dead_letter_counts (queue_id);

-- Dead letters by message: message detail, status lookups and retries.
CREATE INDEX dead_letters_by_offset ON queen.dead_letters (partition_id, message_offset);

CREATE INDEX dead_letters_by_transaction ON queen.dead_letters (partition_id, transaction_id);

CREATE INDEX dead_letters_by_failure ON queen.dead_letters (failed_at);

-- The message list pages newest first across partitions: an index-only walk over segment
-- headers (message_count is included), so skipping a page never reads a frame.
CREATE INDEX segments_time
    ON queen.segments (created_at, partition_id, first_offset) INCLUDE (message_count);

-- A group deleted with deleteMetadata=false keeps its start here; its next pop re-joins from
-- it (queen.join_group) instead of the request's subscription mode.
CREATE TABLE queen.subscription_memory (
    queue_id       uuid NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    consumer_group text NOT NULL,
    start_at       timestamptz,
    PRIMARY KEY (queue_id, consumer_group)
);

-- A deleted message is hidden: its offset stays taken (cursors and offsets never break, no
-- segment is rewritten or dropped for it), every claim steps over it, every count leaves it
-- out, and a dead letter of it is never written. hidden_counts says which partitions have
-- any, so the common case costs one probe of an empty table.
CREATE TABLE queen.hidden_messages (
    partition_id   uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    message_offset bigint NOT NULL,
    deleted_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (partition_id, message_offset)
);

CREATE TABLE queen.hidden_counts (
    partition_id uuid PRIMARY KEY REFERENCES queen.partitions (id) ON DELETE CASCADE,
    hidden       integer NOT NULL
);

-- Time series (docs/operations.md: Monitoring). Every broker process writes its own figures
-- every STATS_INTERVAL_MS: counters as deltas over the interval, gauges as they were.
CREATE TABLE queen.worker_samples (
    worker_id         text NOT NULL,
    sampled_at        timestamptz NOT NULL,
    hostname          text NOT NULL,
    pid               integer NOT NULL,
    started_at        timestamptz NOT NULL,
    interval_ms       integer NOT NULL,
    http_requests     bigint NOT NULL,
    http_errors       bigint NOT NULL,
    push_requests     bigint NOT NULL,
    push_messages     bigint NOT NULL,
    pop_requests      bigint NOT NULL,
    pop_empty         bigint NOT NULL,
    pop_messages      bigint NOT NULL,
    ack_requests      bigint NOT NULL,
    ack_messages      bigint NOT NULL,
    nacked            bigint NOT NULL,
    ack_failed        bigint NOT NULL,
    dead_lettered     bigint NOT NULL,
    transactions      bigint NOT NULL,
    db_calls          bigint NOT NULL,
    db_errors         bigint NOT NULL,
    loop_lag_avg_ms   double precision NOT NULL,
    loop_lag_max_ms   double precision NOT NULL,
    cpu_user_pct      double precision NOT NULL,
    cpu_sys_pct       double precision NOT NULL,
    rss_bytes         bigint NOT NULL,
    pool_max          integer NOT NULL,
    pool_size         integer NOT NULL,
    pool_idle         integer NOT NULL,
    pool_active       integer NOT NULL,
    pool_waiting      integer NOT NULL,
    spool_pending     integer NOT NULL,
    spool_failed      integer NOT NULL,
    long_poll_waiters integer NOT NULL,
    queued_work       integer NOT NULL,
    -- Maintenance changes during the interval, by kind (expired, evicted, reclaimed, ...).
    maintenance       jsonb NOT NULL,
    PRIMARY KEY (worker_id, sampled_at)
);

CREATE INDEX worker_samples_time ON queen.worker_samples (sampled_at);

-- Each process's latest cumulative metric families (queen_trio/ops/metrics.py), so whichever
-- worker answers /metrics/prometheus renders every worker's series.
CREATE TABLE queen.worker_figures (
    worker_id  text PRIMARY KEY,
    hostname   text NOT NULL,
    pid        integer NOT NULL,
    started_at timestamptz NOT NULL,
    sampled_at timestamptz NOT NULL,
    families   jsonb NOT NULL
);

-- Per queue and process, for the intervals where the queue saw traffic or waiters.
CREATE TABLE queen.queue_samples (
    queue_name        text NOT NULL,
    sampled_at        timestamptz NOT NULL,
    worker_id         text NOT NULL,
    hostname          text NOT NULL,
    pid               integer NOT NULL,
    interval_ms       integer NOT NULL,
    pushed            bigint NOT NULL,
    pop_requests      bigint NOT NULL,
    pop_empty         bigint NOT NULL,
    popped            bigint NOT NULL,
    acked             bigint NOT NULL,
    nacked            bigint NOT NULL,
    ack_failed        bigint NOT NULL,
    dead_lettered     bigint NOT NULL,
    long_poll_waiters integer NOT NULL,
    PRIMARY KEY (queue_name, sampled_at, worker_id)
);

CREATE INDEX queue_samples_time ON queen.queue_samples (sampled_at);

-- Cluster figures per queue, once a minute, by whichever broker holds the stats lock.
CREATE TABLE queen.queue_snapshots (
    queue_name      text NOT NULL,
    sampled_at      timestamptz NOT NULL,
    partitions      integer NOT NULL,
    messages        bigint NOT NULL,
    unconsumed      bigint NOT NULL,
    processing      bigint NOT NULL,
    dead_letters    bigint NOT NULL,
    groups          integer NOT NULL,
    max_offset_lag  bigint NOT NULL,
    max_lag_seconds double precision NOT NULL,
    avg_lag_seconds double precision NOT NULL,
    PRIMARY KEY (queue_name, sampled_at)
);

CREATE INDEX queue_snapshots_time ON queen.queue_snapshots (sampled_at);

CREATE INDEX dead_letters_retried ON queen.dead_letters (partition_id, consumer_group)
    WHERE retry_requested_at IS NOT NULL;

-- ack_batch begins with "any retried dead letter in flight?": this answers it from an index
-- that holds only those (and serves its release check, dl.retry_lease_id = cs.lease_id).
CREATE INDEX dead_letters_retry_lease ON queen.dead_letters (retry_lease_id)
    WHERE retry_lease_id IS NOT NULL;
