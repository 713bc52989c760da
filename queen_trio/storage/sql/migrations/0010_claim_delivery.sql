-- A claim never outlives its delivery (docs/api.md: Pops).
--
-- The claim commits in its own round trip, as before. The broker then decodes every claimed
-- frame on the same connection; what it cannot decode (a payload that does not decrypt, a
-- frame that does not parse) it dead-letters for the group through
-- queen.dead_letter_undecodable before the reply goes out, and a pop whose reply cannot be
-- sent gives its lease back through queen.release_lease, which counts no failed delivery.

-- Each claim row now says where each of its frames ends (relative to its own `frames`).
ALTER TYPE queen.claim_row ADD ATTRIBUTE frame_ends integer[];

-- As in 0009, plus frame_ends.
CREATE OR REPLACE FUNCTION queen.pop_claim(
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
            -- Where each delivered frame ends within r.frames: the broker decodes every frame
            -- on its own, so one it cannot read never hides the next.
            r.frame_ends := ARRAY(SELECT e - coalesce(seg.frame_ends[skip_n], 0)
                                    FROM unnest(seg.frame_ends[skip_n + 1 : skip_n + take_n]) e);
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
        r.frames := NULL; r.skip_frames := NULL; r.take_frames := NULL; r.frame_ends := NULL;
        RETURN NEXT r;
    END IF;
END;
$$;

-- Dead-letter, for one pop's group, the claimed messages the broker could not decode. With a
-- lease (p_lease_id), p_cut_* move each partition's cursor past the undecodable messages at its
-- head and cut its delivery short before the next one (p_untils; a cut to nothing releases the
-- lease): a partition whose lease is no longer this pop's is left alone. Without a lease
-- (autoAck) the cursor is already past them and only the dead letters are written. Each dead
-- letter keeps the stored frame (ciphertext included), so the right key makes it readable
-- again. p_txids may hold NULL where the frame's header could not be read: the transaction
-- index then names it. Returns the dead letters written.
CREATE FUNCTION queen.dead_letter_undecodable(
    p_group          text,
    p_lease_id       uuid,
    p_cut_partitions uuid[],
    p_cursors        bigint[],
    p_untils         bigint[],
    p_partitions     uuid[],
    p_offsets        bigint[],
    p_message_ids    uuid[],
    p_txids          text[],
    p_errors         text[]
) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    k       integer;
    st      record;
    owned   uuid[] := ARRAY[]::uuid[];
    written integer;
BEGIN
    IF p_lease_id IS NOT NULL THEN
        -- State rows in partition id order, the lock order of every other writer.
        FOR k IN SELECT u.ord::integer FROM unnest(p_cut_partitions) WITH ORDINALITY AS u(p, ord)
                  ORDER BY u.p LOOP
            SELECT cs.cursor_offset, cs.lease_id, cs.retry_count INTO st
              FROM queen.consumer_state cs
             WHERE cs.partition_id = p_cut_partitions[k] AND cs.consumer_group = p_group
               FOR UPDATE;
            CONTINUE WHEN st IS NULL OR st.lease_id IS DISTINCT FROM p_lease_id;
            owned := owned || p_cut_partitions[k];
            UPDATE queen.consumer_state cs
               SET cursor_offset = p_cursors[k],
                   retry_count = CASE WHEN p_cursors[k] > st.cursor_offset THEN 0
                                      ELSE st.retry_count END,
                   lease_id = CASE WHEN p_untils[k] > p_cursors[k] THEN cs.lease_id END,
                   lease_expires_at = CASE WHEN p_untils[k] > p_cursors[k]
                                           THEN cs.lease_expires_at END,
                   delivered_until = CASE WHEN p_untils[k] > p_cursors[k] THEN p_untils[k] END,
                   head_at = CASE WHEN p_cursors[k] > st.cursor_offset
                                  THEN queen.head_after(p_cut_partitions[k], p_cursors[k])
                                  ELSE cs.head_at END
             WHERE cs.partition_id = p_cut_partitions[k] AND cs.consumer_group = p_group;
        END LOOP;
    END IF;

    INSERT INTO queen.dead_letters (queue_id, partition_id, partition_name, consumer_group,
                                    message_offset, message_id, transaction_id, frame,
                                    message_created_at, error_message, retry_count)
    SELECT p.queue_id, u.pid, p.name, p_group, u.off, u.mid,
           coalesce(u.txid, (SELECT t.transaction_id FROM queen.transaction_index t
                              WHERE t.partition_id = u.pid AND t.message_offset = u.off
                              LIMIT 1), ''),
           queen.frames_between(seg.frames, seg.frame_ends, (u.off - seg.first_offset)::integer,
                                1),
           seg.created_at, u.err, 0
      FROM unnest(p_partitions, p_offsets, p_message_ids, p_txids, p_errors)
           AS u(pid, off, mid, txid, err)
      JOIN queen.partitions p ON p.id = u.pid
      JOIN LATERAL (
            SELECT s.first_offset, s.message_count, s.created_at, s.frames, s.frame_ends
              FROM queen.segments s
             WHERE s.partition_id = u.pid AND s.first_offset <= u.off
             ORDER BY s.first_offset DESC LIMIT 1) seg
        ON seg.first_offset + seg.message_count > u.off
     WHERE p_lease_id IS NULL OR u.pid = ANY (owned);
    GET DIAGNOSTICS written = ROW_COUNT;
    RETURN written;
END;
$$;

-- Give back a pop's lease whose reply could not be sent (the consumer hung up): the
-- partitions are claimable again at once, and no failed delivery is counted (the retry
-- counter keeps what it had). Returns the queues whose partitions were released.
CREATE FUNCTION queen.release_lease(p_lease_id uuid)
RETURNS TABLE (queue_name text) LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM queen.consumer_state cs WHERE cs.lease_id = p_lease_id
      ORDER BY cs.partition_id, cs.consumer_group FOR UPDATE;
    FOR queue_name IN
        WITH released AS (
            UPDATE queen.consumer_state cs
               SET lease_id = NULL, lease_expires_at = NULL, delivered_until = NULL
             WHERE cs.lease_id = p_lease_id
            RETURNING cs.queue_id
        )
        SELECT DISTINCT q.name FROM released r JOIN queen.queues q ON q.id = r.queue_id
    LOOP
        -- Other brokers' long polls may claim them now.
        PERFORM pg_notify('queen_push', queue_name);
        RETURN NEXT;
    END LOOP;
END;
$$;
