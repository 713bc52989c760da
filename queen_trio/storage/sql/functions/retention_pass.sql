-- Retention and eviction (docs/decisions.md#retention). One pass, as of p_now
-- (the service's clock, NULL = now), at most p_limit rows of each kind; the caller holds the
-- maintenance advisory lock, so one broker at a time runs it.
CREATE OR REPLACE FUNCTION queen.retention_pass(p_now timestamptz, p_limit integer)
RETURNS TABLE (expired integer, completed integer, evicted integer, pruned integer)
LANGUAGE plpgsql AS $$
DECLARE
    now_at    timestamptz := coalesce(p_now, clock_timestamp());
    touched   uuid[];
    st        record;
    seg       record;
    cur       bigint;
    cutoff    timestamptz;
    seg_start bigint;
    budget    integer;
    moved     integer;
    pp        record;
BEGIN
    -- 1. retentionSeconds: segments older than N, consumed or not.
    WITH doomed AS (
        SELECT s.partition_id, s.first_offset
          FROM queen.segments s
          JOIN queen.partitions p ON p.id = s.partition_id
          JOIN queen.queues q ON q.id = p.queue_id
         WHERE q.retention_seconds > 0
           AND s.created_at < now_at - make_interval(secs => q.retention_seconds)
         LIMIT p_limit
    ), gone AS (
        DELETE FROM queen.segments s USING doomed d
         WHERE s.partition_id = d.partition_id AND s.first_offset = d.first_offset
        RETURNING s.partition_id
    )
    SELECT count(*)::integer, array_agg(DISTINCT partition_id) INTO expired, touched FROM gone;

    -- 2. completedRetentionSeconds: segments older than N that every group has passed. A
    -- partition no group reads has no state row, so nothing of it counts as completed.
    WITH floor AS (
        SELECT cs.partition_id, min(cs.cursor_offset) AS low
          FROM queen.consumer_state cs GROUP BY cs.partition_id
    ), doomed AS (
        SELECT s.partition_id, s.first_offset
          FROM queen.segments s
          JOIN floor f ON f.partition_id = s.partition_id
          JOIN queen.partitions p ON p.id = s.partition_id
          JOIN queen.queues q ON q.id = p.queue_id
         WHERE q.completed_retention_seconds > 0
           AND s.created_at < now_at - make_interval(secs => q.completed_retention_seconds)
           AND s.first_offset + s.message_count <= f.low
         LIMIT p_limit
    ), gone AS (
        DELETE FROM queen.segments s USING doomed d
         WHERE s.partition_id = d.partition_id AND s.first_offset = d.first_offset
        RETURNING s.partition_id
    )
    SELECT count(*)::integer INTO completed FROM gone;

    -- Groups whose cursor pointed into what retentionSeconds removed continue after it.
    IF touched IS NOT NULL THEN
        UPDATE queen.consumer_state cs
           SET cursor_offset = low.first_offset,
               head_at = queen.head_after(cs.partition_id, low.first_offset)
          FROM (SELECT p.id, coalesce(min(s.first_offset), p.next_offset) AS first_offset
                  FROM queen.partitions p LEFT JOIN queen.segments s ON s.partition_id = p.id
                 WHERE p.id = ANY (touched) GROUP BY p.id, p.next_offset) low
         WHERE cs.partition_id = low.id AND cs.cursor_offset < low.first_offset;
    END IF;

    -- 3. maxWaitTimeSeconds: what a group has not consumed after N seconds goes to that
    -- group's DLQ and its cursor moves past it; a live lease is left alone until it ends.
    evicted := 0;
    budget := p_limit;
    FOR st IN
        SELECT cs.partition_id, cs.consumer_group, cs.cursor_offset, q.max_wait_time_seconds
          FROM queen.queues q
          JOIN queen.consumer_heads h ON h.queue_id = q.id
          JOIN queen.consumer_state cs
            ON cs.partition_id = h.partition_id AND cs.consumer_group = h.consumer_group
         WHERE q.max_wait_time_seconds > 0
           AND h.head_at < now_at - make_interval(secs => q.max_wait_time_seconds)
           AND cs.head_at = h.head_at
           AND (cs.lease_id IS NULL OR cs.lease_expires_at <= now_at)
         ORDER BY cs.partition_id, cs.consumer_group
           FOR UPDATE OF cs SKIP LOCKED
    LOOP
        EXIT WHEN budget <= 0;
        cutoff := now_at - make_interval(secs => st.max_wait_time_seconds);
        cur := st.cursor_offset;
        -- The group's segments from the one holding its cursor, in order, by the primary
        -- key (a range, as pop_claim reads them); none is filtered by age in the statement,
        -- which left the planner free to walk segments_time, every partition's old headers.
        -- Commit times are monotone per partition, so the first young segment ends the walk.
        SELECT max(s.first_offset) INTO seg_start
          FROM queen.segments s WHERE s.partition_id = st.partition_id AND s.first_offset <= cur;
        FOR seg IN
            SELECT s.first_offset, s.message_count, s.created_at FROM queen.segments s
             WHERE s.partition_id = st.partition_id AND s.first_offset >= coalesce(seg_start, 0)
               AND s.first_offset + s.message_count > cur
             ORDER BY s.first_offset
        LOOP
            EXIT WHEN budget <= 0 OR seg.created_at >= cutoff;
            cur := greatest(cur, seg.first_offset);
            WHILE cur < seg.first_offset + seg.message_count AND budget > 0 LOOP
                PERFORM queen.dead_letter(st.partition_id, st.consumer_group, cur,
                                          'maxWaitTimeSeconds exceeded', 0);
                cur := cur + 1;
                budget := budget - 1;
                evicted := evicted + 1;
            END LOOP;
        END LOOP;
        IF cur > st.cursor_offset THEN
            UPDATE queen.consumer_state cs
               SET cursor_offset = cur, retry_count = 0, lease_id = NULL,
                   lease_expires_at = NULL, delivered_until = NULL,
                   head_at = queen.head_after(st.partition_id, cur)
             WHERE cs.partition_id = st.partition_id AND cs.consumer_group = st.consumer_group;
        END IF;
    END LOOP;

    -- 4. The dedup index outlives neither its window nor its segment, whichever is longer;
    -- trace events go with their message. Only the partitions whose first kept offset rose
    -- above what was pruned before (queen.index_pruning) are visited, each through its own
    -- rows, so a database where nothing was removed scans nothing here.
    pruned := 0;
    budget := p_limit;
    FOR pp IN
        SELECT p.id, low.first_offset, coalesce(ip.pruned_to, 0) AS pruned_to,
               q.dedup_window_seconds
          FROM queen.partitions p
          JOIN queen.queues q ON q.id = p.queue_id
          CROSS JOIN LATERAL (
                SELECT coalesce((SELECT min(s.first_offset) FROM queen.segments s
                                  WHERE s.partition_id = p.id), p.next_offset) AS first_offset) low
          LEFT JOIN queen.index_pruning ip ON ip.partition_id = p.id
         WHERE low.first_offset > coalesce(ip.pruned_to, 0)
         ORDER BY p.id
    LOOP
        EXIT WHEN budget <= 0;
        WITH doomed AS (
            SELECT t.ctid FROM queen.transaction_index t
             WHERE t.partition_id = pp.id
               AND t.message_offset >= pp.pruned_to AND t.message_offset < pp.first_offset
               AND t.created_at < now_at - make_interval(secs => pp.dedup_window_seconds)
             LIMIT budget
        ), gone AS (
            DELETE FROM queen.transaction_index t USING doomed d WHERE t.ctid = d.ctid RETURNING 1
        )
        SELECT count(*)::integer INTO moved FROM gone;
        pruned := pruned + moved;
        budget := budget - moved;
        DELETE FROM queen.trace_events e
         WHERE e.partition_id = pp.id AND e.message_offset < pp.first_offset;
        -- Done below the first kept offset once no index row is left there (the rest wait
        -- for their window); a trace is recorded only against an index row.
        IF NOT EXISTS (SELECT 1 FROM queen.transaction_index t
                        WHERE t.partition_id = pp.id AND t.message_offset >= pp.pruned_to
                          AND t.message_offset < pp.first_offset) THEN
            INSERT INTO queen.index_pruning AS ip (partition_id, pruned_to)
            VALUES (pp.id, pp.first_offset)
            ON CONFLICT (partition_id) DO UPDATE SET pruned_to = excluded.pruned_to;
        END IF;
    END LOOP;
    -- The records of partitions that are gone (reclaimed, or their queue deleted).
    DELETE FROM queen.index_pruning ip
     WHERE NOT EXISTS (SELECT 1 FROM queen.partitions p WHERE p.id = ip.partition_id);

    DELETE FROM queen.spool_replayed r WHERE r.replayed_at < now_at - interval '7 days';

    RETURN NEXT;
END;
$$;
