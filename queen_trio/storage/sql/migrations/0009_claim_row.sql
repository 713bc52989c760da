-- The claim-row shape, once: what pop_claim returns for each delivered run of frames (or,
-- with nothing claimed, one row with only next_check_at), and what pop_many and the new
-- pop_namespace wrap with the request or queue they belong to. Before this migration the
-- shape was written out in both 0004 and 0005.
CREATE TYPE queen.claim_row AS (
    partition_id   uuid,
    partition_name text,
    first_offset   bigint,
    created_at     timestamptz,
    frames         bytea,
    skip_frames    integer,
    take_frames    integer,
    next_check_at  timestamptz
);

DROP FUNCTION queen.pop_many(text[], text[], text[], integer[], integer[], uuid[], boolean[],
                             text[], timestamptz[]);
DROP FUNCTION queen.pop_claim(text, text, text, integer, integer, uuid, boolean, text,
                              timestamptz);

-- Unchanged from 0004 but for its return type.
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
) RETURNS SETOF queen.claim_row LANGUAGE plpgsql AS $$
DECLARE
    r          queen.claim_row;
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
            r.partition_id := cs.partition_id; r.partition_name := cs.pname;
            r.first_offset := seg.first_offset + skip_n; r.created_at := seg.created_at;
            r.frames := queen.frames_between(seg.frames, seg.frame_ends, skip_n, take_n);
            r.skip_frames := 0; r.take_frames := take_n;
            r.next_check_at := NULL;
            RETURN NEXT r;
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
          INTO r.next_check_at
          FROM queen.consumer_state st
          JOIN queen.partitions p ON p.id = st.partition_id
         WHERE st.queue_id = q.id AND st.consumer_group = p_group
           AND (p_partition IS NULL OR p.name = p_partition)
           AND st.head_at IS NOT NULL;
        r.partition_id := NULL; r.partition_name := NULL; r.first_offset := NULL; r.created_at := NULL;
        r.frames := NULL; r.skip_frames := NULL; r.take_frames := NULL;
        RETURN NEXT r;
    END IF;
END;
$$;

-- Several pops in one call (the pop fusion), as in 0005: each request is claimed in turn, in
-- one transaction, so one bridge crossing and one round trip serve them all.
CREATE FUNCTION queen.pop_many(
    p_queues         text[],
    p_partitions     text[],
    p_groups         text[],
    p_batches        integer[],
    p_max_partitions integer[],
    p_lease_ids      uuid[],
    p_auto_acks      boolean[],
    p_start_modes    text[],
    p_start_froms    timestamptz[]
) RETURNS TABLE (request_no integer, claim queen.claim_row) LANGUAGE plpgsql AS $$
DECLARE
    i integer;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_queues, 1), 0) LOOP
        RETURN QUERY
            SELECT i, c
              FROM queen.pop_claim(p_queues[i], p_partitions[i], p_groups[i], p_batches[i],
                                   p_max_partitions[i], p_lease_ids[i], p_auto_acks[i],
                                   p_start_modes[i], p_start_froms[i]) c;
    END LOOP;
END;
$$;

-- A namespace/task pop in one round trip (DECISIONS: Pop): the queues whose namespace and task
-- match, higher priority first, then the one whose oldest pending message for the group is
-- oldest; each is claimed with what is left of the batch until the batch is used up. With
-- nothing claimed anywhere, one row per queue carries its next_check_at.
CREATE FUNCTION queen.pop_namespace(
    p_namespace      text,
    p_task           text,
    p_group          text,
    p_batch          integer,
    p_max_partitions integer,
    p_lease_id       uuid,
    p_auto_ack       boolean,
    p_start_mode     text,
    p_start_from     timestamptz
) RETURNS TABLE (queue_name text, claim queen.claim_row) LANGUAGE plpgsql AS $$
DECLARE
    qn        text;
    c         queen.claim_row;
    remaining integer := greatest(p_batch, 1);
    got       integer;
    misses    queen.claim_row[] := ARRAY[]::queen.claim_row[];
    miss_q    text[] := ARRAY[]::text[];
    claimed   boolean := false;
    k         integer;
BEGIN
    FOR qn IN
        SELECT q.name FROM queen.queues q
         WHERE (p_namespace IS NULL OR q.namespace = p_namespace)
           AND (p_task IS NULL OR q.task = p_task)
         ORDER BY q.priority DESC,
                  (SELECT min(cs.head_at) FROM queen.consumer_state cs
                    WHERE cs.queue_id = q.id AND cs.consumer_group = p_group) NULLS LAST,
                  q.name
    LOOP
        got := 0;
        FOR c IN SELECT * FROM queen.pop_claim(qn, NULL, p_group, remaining, p_max_partitions,
                                               p_lease_id, p_auto_ack, p_start_mode,
                                               p_start_from)
        LOOP
            IF c.partition_id IS NULL THEN
                misses := misses || c;
                miss_q := miss_q || qn;
            ELSE
                got := got + c.take_frames;
                claimed := true;
                queue_name := qn; claim := c;
                RETURN NEXT;
            END IF;
        END LOOP;
        remaining := remaining - got;
        EXIT WHEN remaining <= 0;
    END LOOP;
    IF NOT claimed THEN
        FOR k IN 1 .. coalesce(array_length(misses, 1), 0) LOOP
            queue_name := miss_q[k]; claim := misses[k];
            RETURN NEXT;
        END LOOP;
    END IF;
END;
$$;
