-- Operations (issue 9): what the admin, status and metrics routes read. Nothing here adds work
-- to the push transaction but one index entry per segment (segments_time, for the message
-- list); depth and lag are derived from partitions.next_offset and the groups' cursors.

-- What a group has consumed, kept by a trigger on every forward cursor move (acks, autoAck,
-- dead letters, eviction), so no consumer path needs to know about it. A seek is an operator's
-- rewind, not consumption: it sets queen.seek for its transaction and is not counted.
ALTER TABLE queen.consumer_state
    ADD COLUMN last_consumed_at timestamptz,
    ADD COLUMN consumed_total bigint NOT NULL DEFAULT 0;

CREATE FUNCTION queen.count_consumption() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.consumed_total := OLD.consumed_total + (NEW.cursor_offset - OLD.cursor_offset);
    NEW.last_consumed_at := clock_timestamp();
    RETURN NEW;
END;
$$;

CREATE TRIGGER consumer_state_consumed
    BEFORE UPDATE OF cursor_offset ON queen.consumer_state
    FOR EACH ROW
    WHEN (NEW.cursor_offset > OLD.cursor_offset
          AND current_setting('queen.seek', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION queen.count_consumption();

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

CREATE FUNCTION queen.count_dead_letters_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO queen.dead_letter_counts AS c (partition_id, consumer_group, queue_id, dead)
    SELECT a.partition_id, a.consumer_group, (array_agg(a.queue_id))[1], count(*)
      FROM added a GROUP BY a.partition_id, a.consumer_group
     ORDER BY a.partition_id, a.consumer_group
    ON CONFLICT (partition_id, consumer_group) DO UPDATE SET dead = c.dead + EXCLUDED.dead;
    RETURN NULL;
END;
$$;

CREATE FUNCTION queen.count_dead_letters_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH gone AS (
        SELECT r.partition_id, r.consumer_group, count(*) AS n
          FROM removed r GROUP BY r.partition_id, r.consumer_group
    )
    UPDATE queen.dead_letter_counts c SET dead = c.dead - g.n
      FROM gone g
     WHERE c.partition_id = g.partition_id AND c.consumer_group = g.consumer_group;
    DELETE FROM queen.dead_letter_counts c
     WHERE c.dead <= 0
       AND (c.partition_id, c.consumer_group) IN (SELECT r.partition_id, r.consumer_group
                                                    FROM removed r);
    RETURN NULL;
END;
$$;

CREATE TRIGGER dead_letters_added AFTER INSERT ON queen.dead_letters
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT
    EXECUTE FUNCTION queen.count_dead_letters_added();
CREATE TRIGGER dead_letters_removed AFTER DELETE ON queen.dead_letters
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT
    EXECUTE FUNCTION queen.count_dead_letters_removed();

INSERT INTO queen.dead_letter_counts (partition_id, consumer_group, queue_id, dead)
SELECT d.partition_id, d.consumer_group, (array_agg(d.queue_id))[1], count(*)
  FROM queen.dead_letters d GROUP BY d.partition_id, d.consumer_group;

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

-- As in 0004, but a remembered start wins over the request's.
CREATE OR REPLACE FUNCTION queen.join_group(p_queue_id uuid, p_group text, p_start timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    joined     integer;
    remembered timestamptz;
BEGIN
    PERFORM 1 FROM queen.queues WHERE id = p_queue_id FOR UPDATE;
    DELETE FROM queen.subscription_memory m
     WHERE m.queue_id = p_queue_id AND m.consumer_group = p_group
    RETURNING m.start_at INTO remembered;
    IF FOUND THEN
        p_start := remembered;
    END IF;
    INSERT INTO queen.subscriptions (queue_id, consumer_group, start_at)
    VALUES (p_queue_id, p_group, p_start)
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS joined = ROW_COUNT;
    IF joined = 0 THEN
        RETURN;
    END IF;
    INSERT INTO queen.consumer_state
           (partition_id, consumer_group, queue_id, start_at, cursor_offset, head_at)
    SELECT p.id, p_group, p_queue_id, p_start,
           coalesce(first_seg.first_offset, p.next_offset), first_seg.created_at
      FROM queen.partitions p
      LEFT JOIN LATERAL (
            SELECT s.first_offset, s.created_at
              FROM queen.segments s
             WHERE s.partition_id = p.id AND (p_start IS NULL OR s.created_at >= p_start)
             ORDER BY s.created_at, s.first_offset
             LIMIT 1) first_seg ON true
     WHERE p.queue_id = p_queue_id
    ON CONFLICT DO NOTHING;
END;
$$;

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

CREATE FUNCTION queen.count_hidden() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO queen.hidden_counts AS c (partition_id, hidden)
        SELECT a.partition_id, count(*) FROM added a GROUP BY a.partition_id
         ORDER BY a.partition_id
        ON CONFLICT (partition_id) DO UPDATE SET hidden = c.hidden + EXCLUDED.hidden;
    ELSE
        UPDATE queen.hidden_counts c SET hidden = c.hidden - g.n
          FROM (SELECT r.partition_id, count(*) AS n FROM removed r GROUP BY r.partition_id) g
         WHERE c.partition_id = g.partition_id;
        DELETE FROM queen.hidden_counts c WHERE c.hidden <= 0;
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER hidden_messages_added AFTER INSERT ON queen.hidden_messages
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION queen.count_hidden();
CREATE TRIGGER hidden_messages_removed AFTER DELETE ON queen.hidden_messages
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION queen.count_hidden();

-- Per partition, where its groups stand, in one pass over consumer_state (a hash aggregate,
-- no sort): how many, every group's dead letters, and the slowest group as the smallest
-- [cursor, live lease end (-1: none), its dead letters]: the worst cursor first. Grouped by
-- (queue, partition), so a filter on either reaches the scan.
CREATE VIEW queen.partition_positions AS
SELECT cs.queue_id, cs.partition_id,
       count(*) AS groups,
       count(*) FILTER (WHERE cs.retry_count > 0 AND cs.head_at IS NOT NULL) AS retrying,
       max(cs.last_consumed_at) AS last_consumed_at,
       min(cs.head_at) AS oldest_pending_at,
       coalesce(sum(d.dead), 0) AS dead,
       min(ARRAY[cs.cursor_offset,
                 CASE WHEN cs.lease_id IS NOT NULL AND cs.lease_expires_at > now()
                      THEN cs.delivered_until ELSE -1 END,
                 coalesce(d.dead, 0)]) AS slowest
  FROM queen.consumer_state cs
  LEFT JOIN queen.dead_letter_counts d
         ON d.partition_id = cs.partition_id AND d.consumer_group = cs.consumer_group
 GROUP BY cs.queue_id, cs.partition_id;

-- Per partition: what it holds ([low_offset, next_offset), less its deleted messages), and
-- where its slowest group stands (the worst cursor: what the queue still holds unconsumed, as
-- maxSize counts it; a partition no group reads holds everything unconsumed). One index probe
-- for the low offset; nothing here reads a message. pending + processing + completed (+ the
-- slowest group's dead letters) add up to total.
CREATE VIEW queen.partition_figures AS
SELECT f.*,
       f.unconsumed - f.processing AS pending,
       greatest(f.total - f.unconsumed - f.slowest_dead, 0) AS completed
  FROM (
SELECT p.id AS partition_id, p.queue_id, p.name, p.created_at, p.next_offset, p.last_commit_at,
       b.low AS low_offset,
       first_seg.created_at AS oldest_at,
       p.next_offset - b.low - coalesce(hid.held, 0) AS total,
       p.next_offset - b.from_offset - coalesce(hid.unconsumed, 0) AS unconsumed,
       CASE WHEN coalesce(pos.slowest[2], -1) < 0 THEN 0
            ELSE greatest(least(pos.slowest[2], p.next_offset) - b.from_offset
                          - coalesce(hid.in_flight, 0), 0)
       END AS processing,
       coalesce(pos.slowest[3], 0) AS slowest_dead,
       coalesce(pos.dead, 0) AS dead_letters,
       coalesce(pos.groups, 0) AS groups,
       coalesce(pos.retrying, 0) AS retrying,
       pos.last_consumed_at,
       pos.oldest_pending_at
  FROM queen.partitions p
  LEFT JOIN LATERAL (
        SELECT s.first_offset, s.created_at FROM queen.segments s
         WHERE s.partition_id = p.id ORDER BY s.first_offset LIMIT 1) first_seg ON true
  LEFT JOIN queen.partition_positions pos
         ON pos.partition_id = p.id AND pos.queue_id = p.queue_id
 CROSS JOIN LATERAL (
        SELECT coalesce(first_seg.first_offset, p.next_offset) AS low,
               greatest(coalesce(pos.slowest[1], 0),
                        coalesce(first_seg.first_offset, p.next_offset)) AS from_offset) b
  LEFT JOIN queen.hidden_counts hc ON hc.partition_id = p.id
  LEFT JOIN LATERAL (
        SELECT count(*) FILTER (WHERE h.message_offset >= b.low) AS held,
               count(*) FILTER (WHERE h.message_offset >= b.from_offset) AS unconsumed,
               count(*) FILTER (WHERE h.message_offset >= b.from_offset
                                  AND h.message_offset < pos.slowest[2]) AS in_flight
          FROM queen.hidden_messages h
         WHERE hc.partition_id IS NOT NULL AND h.partition_id = p.id) hid ON true
) f;

-- Per (partition, group): the group's backlog, in flight and dead letters, less deleted
-- messages.
CREATE VIEW queen.group_figures AS
SELECT cs.partition_id, cs.consumer_group, cs.queue_id, p.name AS partition_name,
       p.next_offset, cs.cursor_offset,
       greatest(p.next_offset - cs.cursor_offset - coalesce(hid.unconsumed, 0), 0) AS unconsumed,
       CASE WHEN cs.lease_id IS NOT NULL AND cs.lease_expires_at > now()
            THEN greatest(least(cs.delivered_until, p.next_offset) - cs.cursor_offset
                          - coalesce(hid.in_flight, 0), 0)
            ELSE 0 END AS processing,
       CASE WHEN cs.lease_id IS NOT NULL AND cs.lease_expires_at > now()
            THEN cs.lease_id END AS live_lease_id,
       CASE WHEN cs.lease_id IS NOT NULL AND cs.lease_expires_at > now()
            THEN cs.lease_expires_at END AS live_lease_expires_at,
       coalesce(d.dead, 0) AS dead,
       cs.head_at, cs.retry_count, cs.last_consumed_at, cs.consumed_total, cs.start_at
  FROM queen.consumer_state cs
  JOIN queen.partitions p ON p.id = cs.partition_id
  LEFT JOIN queen.dead_letter_counts d
         ON d.partition_id = cs.partition_id AND d.consumer_group = cs.consumer_group
  LEFT JOIN queen.hidden_counts hc ON hc.partition_id = cs.partition_id
  LEFT JOIN LATERAL (
        SELECT count(*) FILTER (WHERE h.message_offset >= cs.cursor_offset) AS unconsumed,
               count(*) FILTER (WHERE h.message_offset >= cs.cursor_offset
                                  AND h.message_offset < cs.delivered_until) AS in_flight
          FROM queen.hidden_messages h
         WHERE hc.partition_id IS NOT NULL AND h.partition_id = cs.partition_id) hid ON true;

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
