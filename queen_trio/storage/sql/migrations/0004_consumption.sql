-- Consumption: joining a group, claiming partitions, acks, dead letters, lease extension.
-- The frame format is queen_trio/frames.py: a 25-byte header (16 id, 1 flags, 2 txid length,
-- 2 sub length, 4 payload length), 16 more bytes of trace id when flags & 2, then the text.

-- The bytes of frames [p_from, p_from + p_count) (0-based) of a segment, cut by frame_ends.
CREATE FUNCTION queen.frames_between(p_frames bytea, p_ends integer[], p_from integer,
                                     p_count integer) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT substring(p_frames
                     FROM coalesce(p_ends[p_from], 0) + 1
                     FOR p_ends[p_from + p_count] - coalesce(p_ends[p_from], 0))
$$;

-- The commit time of the message at `p_cursor`, or NULL when nothing is at or after it.
-- VOLATILE on purpose: called after the caller locked the state row, it must read the
-- partition as of now (a fresh snapshot), not as of the start of the calling statement.
CREATE FUNCTION queen.head_after(p_partition uuid, p_cursor bigint) RETURNS timestamptz
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    found_at timestamptz;
BEGIN
    SELECT s.created_at INTO found_at
      FROM queen.segments s
     WHERE s.partition_id = p_partition AND s.first_offset <= p_cursor
       AND s.first_offset + s.message_count > p_cursor
     ORDER BY s.first_offset DESC LIMIT 1;
    IF found_at IS NULL THEN
        SELECT s.created_at INTO found_at
          FROM queen.segments s
         WHERE s.partition_id = p_partition AND s.first_offset > p_cursor
         ORDER BY s.first_offset LIMIT 1;
    END IF;
    RETURN found_at;
END;
$$;

-- A group's first contact with a queue: record its start and give it a state row on every
-- partition. The queue row's lock orders this against pushes creating partitions.
CREATE FUNCTION queen.join_group(p_queue_id uuid, p_group text, p_start timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    joined integer;
BEGIN
    PERFORM 1 FROM queen.queues WHERE id = p_queue_id FOR UPDATE;
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

-- Copy the message at `p_offset` into the group's dead letters. Returns false when its
-- segment is gone (nothing to copy).
CREATE FUNCTION queen.dead_letter(p_partition uuid, p_group text, p_offset bigint,
                                  p_error text, p_retry_count integer)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    seg   record;
    frame bytea;
    tx_len integer;
    trace_len integer;
BEGIN
    SELECT s.first_offset, s.created_at, s.frames, s.frame_ends, p.name AS partition_name,
           p.queue_id
      INTO seg
      FROM queen.segments s JOIN queen.partitions p ON p.id = s.partition_id
     WHERE s.partition_id = p_partition AND s.first_offset <= p_offset
       AND s.first_offset + s.message_count > p_offset
     ORDER BY s.first_offset DESC LIMIT 1;
    IF seg IS NULL THEN
        RETURN false;
    END IF;
    frame := queen.frames_between(seg.frames, seg.frame_ends,
                                  (p_offset - seg.first_offset)::integer, 1);
    trace_len := CASE WHEN get_byte(frame, 16) & 2 = 2 THEN 16 ELSE 0 END;
    tx_len := get_byte(frame, 17) << 8 | get_byte(frame, 18);
    INSERT INTO queen.dead_letters (queue_id, partition_id, partition_name, consumer_group,
                                    message_offset, message_id, transaction_id, frame,
                                    message_created_at, error_message, retry_count)
    VALUES (seg.queue_id, p_partition, seg.partition_name, p_group, p_offset,
            encode(substring(frame FROM 1 FOR 16), 'hex')::uuid,
            convert_from(substring(frame FROM 26 + trace_len FOR tx_len), 'UTF8'),
            frame, seg.created_at, p_error, p_retry_count);
    RETURN true;
END;
$$;

-- Claim up to p_max_partitions partitions of a queue (or the one named) with something
-- deliverable for the group, oldest pending first, skipping locked rows; lease each under
-- p_lease_id and return the segments to deliver (skip/take frames of each). With nothing
-- claimed, one row with only next_check_at: when something may next become deliverable.
CREATE FUNCTION queen.pop_claim(
    p_queue          text,
    p_partition      text,
    p_group          text,
    p_batch          integer,
    p_max_partitions integer,
    p_lease_id       uuid,
    p_auto_ack       boolean,
    -- A new group's start: 'all' (the beginning), 'new' (this moment) or 'from' p_start_from.
    p_start_mode     text,
    p_start_from     timestamptz
) RETURNS TABLE (
    partition_id     uuid,
    partition_name   text,
    first_offset     bigint,
    created_at       timestamptz,
    frames           bytea,
    skip_frames      integer,
    take_frames      integer,
    next_check_at    timestamptz
) LANGUAGE plpgsql AS $$
DECLARE
    q          record;
    cs         record;
    seg        record;
    now_at     timestamptz := clock_timestamp();
    cut_at     timestamptz;
    remaining  integer := greatest(p_batch, 1);
    lease_secs integer;
    cur        bigint;
    retries    integer;
    seg_start  bigint;
    skip_n     integer;
    take_n     integer;
    until_off  bigint;
    claimed    integer := 0;
BEGIN
    SELECT qq.id, qq.lease_time, qq.delayed_processing, qq.window_buffer, qq.retry_limit,
           qq.dead_letter_queue
      INTO q FROM queen.queues qq WHERE qq.name = p_queue;
    IF q IS NULL THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM queen.subscriptions s
                    WHERE s.queue_id = q.id AND s.consumer_group = p_group) THEN
        PERFORM queen.join_group(q.id, p_group, CASE p_start_mode
            WHEN 'new' THEN now_at WHEN 'from' THEN p_start_from END);
    END IF;
    cut_at := now_at - make_interval(secs => q.delayed_processing);
    lease_secs := CASE WHEN q.lease_time > 0 THEN q.lease_time ELSE 60 END;

    FOR cs IN
        SELECT st.partition_id, st.cursor_offset, st.lease_id, st.delivered_until,
               st.retry_count, p.name AS pname
          FROM queen.consumer_state st
          JOIN queen.partitions p ON p.id = st.partition_id
         WHERE st.queue_id = q.id AND st.consumer_group = p_group
           AND (p_partition IS NULL OR p.name = p_partition)
           AND st.head_at IS NOT NULL AND st.head_at <= cut_at
           AND (st.lease_expires_at IS NULL OR st.lease_expires_at <= now_at)
           AND (st.not_before IS NULL OR st.not_before <= now_at)
           AND (q.window_buffer = 0
                OR p.last_commit_at <= now_at - make_interval(secs => q.window_buffer))
         ORDER BY st.head_at, st.partition_id
         LIMIT greatest(p_max_partitions, 1)
           FOR UPDATE OF st SKIP LOCKED
    LOOP
        EXIT WHEN remaining <= 0;
        cur := cs.cursor_offset;
        retries := cs.retry_count;
        -- A lease that expired with messages unsettled was a failed delivery.
        IF cs.lease_id IS NOT NULL AND cs.delivered_until > cur THEN
            retries := retries + 1;
            IF retries > q.retry_limit THEN
                IF q.dead_letter_queue THEN
                    PERFORM queen.dead_letter(cs.partition_id, p_group, cur,
                        'Lease expired without an ack ' || retries || ' times', retries - 1);
                ELSE
                    RAISE LOG 'queen: dropped exhausted message % of partition % for group %',
                        cur, cs.partition_id, p_group;
                END IF;
                cur := cur + 1;
                retries := 0;
            END IF;
        END IF;

        SELECT max(s.first_offset) INTO seg_start
          FROM queen.segments s WHERE s.partition_id = cs.partition_id AND s.first_offset <= cur;
        until_off := cur;
        FOR seg IN
            SELECT s.first_offset, s.message_count, s.created_at, s.frames, s.frame_ends
              FROM queen.segments s
             WHERE s.partition_id = cs.partition_id
               AND s.first_offset >= coalesce(seg_start, 0)
               AND s.first_offset + s.message_count > cur
               AND s.first_offset < cur + remaining
               AND s.created_at <= cut_at
             ORDER BY s.first_offset
        LOOP
            EXIT WHEN remaining <= 0;
            skip_n := greatest(cur - seg.first_offset, 0)::integer;
            take_n := least(seg.message_count - skip_n, remaining);
            -- Only the delivered frames travel: skip_frames is 0 in what is returned.
            partition_id := cs.partition_id; partition_name := cs.pname;
            first_offset := seg.first_offset + skip_n; created_at := seg.created_at;
            frames := queen.frames_between(seg.frames, seg.frame_ends, skip_n, take_n);
            skip_frames := 0; take_frames := take_n;
            next_check_at := NULL;
            RETURN NEXT;
            remaining := remaining - take_n;
            until_off := seg.first_offset + skip_n + take_n;
        END LOOP;

        IF until_off = cur THEN
            -- Nothing deliverable after all (a dead-lettered poison message was the last).
            UPDATE queen.consumer_state st
               SET cursor_offset = cur, retry_count = retries, lease_id = NULL,
                   lease_expires_at = NULL, delivered_until = NULL,
                   head_at = queen.head_after(cs.partition_id, cur)
             WHERE st.partition_id = cs.partition_id AND st.consumer_group = p_group;
            CONTINUE;
        END IF;
        claimed := claimed + 1;
        IF p_auto_ack THEN
            UPDATE queen.consumer_state st
               SET cursor_offset = until_off, retry_count = 0, lease_id = NULL,
                   lease_expires_at = NULL, delivered_until = NULL, not_before = NULL,
                   head_at = queen.head_after(cs.partition_id, until_off)
             WHERE st.partition_id = cs.partition_id AND st.consumer_group = p_group;
        ELSE
            UPDATE queen.consumer_state st
               SET cursor_offset = cur, retry_count = retries, lease_id = p_lease_id,
                   lease_expires_at = now_at + make_interval(secs => lease_secs),
                   delivered_until = until_off, not_before = NULL,
                   head_at = CASE WHEN cur = cs.cursor_offset THEN st.head_at
                                  ELSE queen.head_after(cs.partition_id, cur) END
             WHERE st.partition_id = cs.partition_id AND st.consumer_group = p_group;
        END IF;
    END LOOP;

    IF claimed = 0 THEN
        -- When might something become deliverable? (the long poll parks until then at most)
        SELECT min(greatest(st.head_at + make_interval(secs => q.delayed_processing),
                            coalesce(st.lease_expires_at, '-infinity'),
                            coalesce(st.not_before, '-infinity'),
                            CASE WHEN q.window_buffer > 0
                                 THEN p.last_commit_at + make_interval(secs => q.window_buffer)
                                 ELSE '-infinity' END))
          INTO next_check_at
          FROM queen.consumer_state st
          JOIN queen.partitions p ON p.id = st.partition_id
         WHERE st.queue_id = q.id AND st.consumer_group = p_group
           AND (p_partition IS NULL OR p.name = p_partition)
           AND st.head_at IS NOT NULL;
        partition_id := NULL; partition_name := NULL; first_offset := NULL; created_at := NULL;
        frames := NULL; skip_frames := NULL; take_frames := NULL;
        RETURN NEXT;
    END IF;
END;
$$;

-- Settle acknowledgements (DECISIONS: Ack, retries, DLQ), of one request or of several fused by
-- the ack lane; each item names its group. Items are applied per (partition, group), in
-- ascending partition id (the lock order), in offset order within it. Returns one row per
-- item (its 1-based position in the arrays) and `released`: the lease of the partition was
-- released with messages still pending (long polls of the queue should look again).
CREATE FUNCTION queen.ack_batch(
    p_groups     text[],
    p_partitions uuid[],
    p_txids      text[],
    p_statuses   text[],
    p_leases     uuid[],
    p_errors     text[]
) RETURNS TABLE (
    item_no        integer,
    success        boolean,
    error          text,
    queue_name     text,
    partition_name text,
    lease_released boolean,
    dlq            boolean,
    released       boolean
) LANGUAGE plpgsql AS $$
DECLARE
    pid        uuid;
    grp        text;
    pg         record;
    st         record;
    q          record;
    it         record;
    now_at     timestamptz := clock_timestamp();
    cur        bigint;
    retries    integer;
    live       boolean;
    stopped    boolean;
    counted    boolean;
    exhausted  boolean;
    moved      boolean;
    release_it boolean;
    nacked     boolean;
    delay_ms   integer;
    results    jsonb;
BEGIN
    FOR pg IN SELECT DISTINCT u.p, u.g FROM unnest(p_partitions, p_groups) AS u(p, g)
               ORDER BY u.p, u.g LOOP
        pid := pg.p;
        grp := pg.g;
        SELECT cs.*, p.name AS pname INTO st
          FROM queen.consumer_state cs JOIN queen.partitions p ON p.id = cs.partition_id
         WHERE cs.partition_id = pid AND cs.consumer_group = grp
           FOR UPDATE OF cs;
        SELECT qq.name, qq.retry_limit, qq.retry_delay, qq.dead_letter_queue INTO q
          FROM queen.partitions p JOIN queen.queues qq ON qq.id = p.queue_id WHERE p.id = pid;

        IF st IS NULL THEN
            FOR it IN SELECT u.ord::integer AS ord
                        FROM unnest(p_partitions, p_groups) WITH ORDINALITY AS u(p, g, ord)
                       WHERE u.p = pid AND u.g = grp LOOP
                item_no := it.ord; success := false; dlq := false; released := false;
                lease_released := NULL; queue_name := q.name; partition_name := NULL;
                error := CASE WHEN q IS NULL THEN 'Message not found'
                              ELSE 'Message was not delivered to consumer group ' || grp END;
                RETURN NEXT;
            END LOOP;
            CONTINUE;
        END IF;

        cur := st.cursor_offset;
        retries := st.retry_count;
        live := st.lease_id IS NOT NULL AND st.lease_expires_at > now_at;
        stopped := false; counted := false; exhausted := false; moved := false;
        release_it := false; nacked := false;

        FOR it IN
            SELECT u.ord::integer AS ord, u.txid, u.status, u.lease, u.err, hit.message_offset AS off,
                   (hit.message_offset IS NULL AND EXISTS (
                        SELECT 1 FROM queen.transaction_index t
                         WHERE t.partition_id = pid AND t.transaction_id = u.txid)) AS settled
              FROM unnest(p_partitions, p_groups, p_txids, p_statuses, p_leases, p_errors)
                   WITH ORDINALITY AS u(p, g, txid, status, lease, err, ord)
              LEFT JOIN LATERAL (
                    SELECT t.message_offset FROM queen.transaction_index t
                     WHERE t.partition_id = pid AND t.transaction_id = u.txid
                       AND t.message_offset >= st.cursor_offset
                     ORDER BY t.message_offset LIMIT 1) hit ON true
             WHERE u.p = pid AND u.g = grp
             ORDER BY hit.message_offset NULLS LAST, u.ord
        LOOP
            item_no := it.ord; queue_name := q.name; partition_name := st.pname;
            success := false; error := NULL; lease_released := false; dlq := false;
            released := false;
            IF it.off IS NULL THEN
                error := CASE WHEN it.settled THEN 'Message already settled for this consumer group'
                              ELSE 'Message not found' END;
            ELSIF it.lease IS NOT NULL AND (NOT live OR it.lease IS DISTINCT FROM st.lease_id) THEN
                error := 'Invalid or expired lease';
            ELSIF NOT live THEN
                error := 'Message is not leased to this consumer group (no live lease)';
            ELSIF it.off < cur THEN
                error := 'Message already settled for this consumer group';
            ELSIF it.off >= st.delivered_until THEN
                error := 'Message was not delivered under the current lease';
            ELSIF stopped AND it.status IN ('failed', 'retry') THEN
                -- Part of the same nack: the delivery is already released for redelivery.
                success := true; lease_released := true;
            ELSIF stopped THEN
                error := 'Not applied: an earlier message of this partition was not settled in this call';
            ELSIF it.status IN ('completed', 'success') THEN
                cur := it.off + 1; moved := true; retries := 0; exhausted := false;
                success := true;
            ELSIF it.status = 'dlq' THEN
                PERFORM queen.dead_letter(pid, grp, it.off,
                                          coalesce(nullif(it.err, ''), 'Dead-lettered by the consumer'),
                                          retries);
                cur := it.off + 1; moved := true; retries := 0;
                success := true; dlq := true;
            ELSIF it.status = 'failed' THEN
                IF NOT counted THEN
                    retries := retries + 1;
                    counted := true;
                    exhausted := retries > q.retry_limit;
                END IF;
                IF exhausted AND it.off = cur THEN
                    IF q.dead_letter_queue THEN
                        PERFORM queen.dead_letter(pid, grp, it.off,
                                                  coalesce(nullif(it.err, ''), 'Retries exhausted'),
                                                  retries - 1);
                        dlq := true;
                    ELSE
                        RAISE LOG 'queen: dropped exhausted message % of partition % for group %',
                            it.off, pid, grp;
                    END IF;
                    cur := it.off + 1; moved := true;
                    success := true;
                ELSE
                    stopped := true; release_it := true; nacked := true;
                    success := true; lease_released := true;
                END IF;
            ELSIF it.status = 'retry' THEN
                stopped := true; release_it := true;
                success := true; lease_released := true;
            ELSE
                error := 'Unknown status ' || coalesce(it.status, 'null');
            END IF;
            IF success AND NOT release_it AND cur >= st.delivered_until THEN
                -- Every message of the delivery is settled: the lease ends here.
                release_it := true; lease_released := true;
            END IF;
            RETURN NEXT;
        END LOOP;

        IF exhausted AND moved AND NOT nacked THEN
            retries := 0;
        END IF;
        IF moved OR release_it THEN
            delay_ms := CASE WHEN nacked THEN q.retry_delay ELSE 0 END;
            UPDATE queen.consumer_state cs
               SET cursor_offset = cur,
                   retry_count = retries,
                   lease_id = CASE WHEN release_it THEN NULL ELSE cs.lease_id END,
                   lease_expires_at = CASE WHEN release_it THEN NULL ELSE cs.lease_expires_at END,
                   delivered_until = CASE WHEN release_it THEN NULL ELSE cs.delivered_until END,
                   not_before = CASE WHEN delay_ms > 0
                                     THEN now_at + make_interval(secs => delay_ms / 1000.0)
                                     ELSE NULL END,
                   head_at = queen.head_after(pid, cur)
             WHERE cs.partition_id = pid AND cs.consumer_group = grp;
            IF release_it THEN
                -- Tell the caller (and other brokers) that the partition may be claimable.
                item_no := NULL; success := NULL; error := NULL; queue_name := q.name;
                partition_name := st.pname; lease_released := NULL; dlq := NULL; released := true;
                RETURN NEXT;
                PERFORM pg_notify('queen_push', q.name);
            END IF;
        END IF;
    END LOOP;
END;
$$;

-- Extend every partition leased under p_lease_id to max(current, now + seconds); an expired
-- lease is never revived.
CREATE FUNCTION queen.extend_lease(p_lease_id uuid, p_seconds integer)
RETURNS TABLE (renewed integer, expires_at timestamptz, problem text)
LANGUAGE plpgsql AS $$
DECLARE
    now_at timestamptz := clock_timestamp();
BEGIN
    WITH extended AS (
        UPDATE queen.consumer_state cs
           SET lease_expires_at = greatest(cs.lease_expires_at,
                                           now_at + make_interval(secs => p_seconds))
         WHERE cs.lease_id = p_lease_id AND cs.lease_expires_at > now_at
        RETURNING cs.lease_expires_at
    )
    SELECT count(*)::integer, min(e.lease_expires_at) INTO renewed, expires_at FROM extended e;
    IF renewed = 0 THEN
        problem := CASE WHEN EXISTS (SELECT 1 FROM queen.consumer_state cs
                                      WHERE cs.lease_id = p_lease_id)
                        THEN 'Lease already expired' ELSE 'Lease not found' END;
    END IF;
    RETURN NEXT;
END;
$$;
