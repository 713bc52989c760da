-- Fixes to 0015's message delete and dead-letter retry (review of issue 9):
-- (1) acks probe for retried dead letters in flight through an index, not a scan of the DLQ;
-- (2) two concurrent deletes of one message: the second finds it hidden and answers nothing
--     (404), never a unique violation;
-- (3) a group whose cursor steps over a deleted message does not carry its failed deliveries
--     (retry_count, not_before) to the next one, whether the delete or the claim steps;
-- (4) a retried dead letter whose leases keep expiring goes back to being an ordinary dead
--     letter after the queue's retryLimit + 1 deliveries, as a message is dead-lettered, so
--     the group's cursor on the partition moves on.

-- ack_batch begins with "any retried dead letter in flight?": this answers it from an index
-- that holds only those (and serves its release check, dl.retry_lease_id = cs.lease_id).
CREATE INDEX dead_letters_retry_lease ON queen.dead_letters (retry_lease_id)
    WHERE retry_lease_id IS NOT NULL;

-- Leases that expired with the retried dead letter unsettled since the operator's retry.
ALTER TABLE queen.dead_letters ADD COLUMN retry_expiries integer NOT NULL DEFAULT 0;

-- As in 0015, plus: stepping over deleted messages at the cursor resets the retry counter,
-- and expired leases of retried dead letters are counted (see the header).
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
    hidden     bigint[];
    pos        integer;
    run_from   integer;
    d          record;
    retried    integer;
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
        hidden := NULL;
        IF EXISTS (SELECT 1 FROM queen.hidden_counts hc
                    WHERE hc.partition_id = cs.partition_id) THEN
            -- Deleted messages are nobody's: the cursor steps over those at its head, and
            -- runs of delivered frames go around the others.
            SELECT array_agg(h.message_offset ORDER BY h.message_offset) INTO hidden
              FROM queen.hidden_messages h
             WHERE h.partition_id = cs.partition_id AND h.message_offset >= cur;
            WHILE cur = ANY (hidden) LOOP
                cur := cur + 1;
            END LOOP;
            IF cur > cs.cursor_offset THEN
                -- The failed deliveries counted were the deleted message's (0016).
                retries := 0;
            END IF;
        END IF;
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

        -- A lease that delivered retried dead letters and expired with them unsettled was a
        -- failed delivery of each; past the queue's retryLimit such a dead letter is an
        -- ordinary one again, no longer first in line, and the group goes on with the
        -- partition (0016).
        IF cs.lease_id IS NOT NULL THEN
            UPDATE queen.dead_letters dl
               SET retry_expiries = dl.retry_expiries + 1, retry_lease_id = NULL
             WHERE dl.partition_id = cs.partition_id AND dl.consumer_group = p_group
               AND dl.retry_requested_at IS NOT NULL AND dl.retry_lease_id = cs.lease_id;
            UPDATE queen.dead_letters dl
               SET retry_requested_at = NULL, failed_at = now_at,
                   error_message = 'Lease expired without an ack ' || dl.retry_expiries
                                   || ' times after a retry'
             WHERE dl.partition_id = cs.partition_id AND dl.consumer_group = p_group
               AND dl.retry_requested_at IS NOT NULL AND dl.retry_expiries > q.retry_limit;
        END IF;

        -- Dead letters an operator retried for this group come first, alone in this claim of
        -- the partition (their offsets are behind the cursor, which they never move).
        retried := 0;
        FOR d IN
            SELECT dl.id, dl.message_offset, dl.message_created_at, dl.frame
              FROM queen.dead_letters dl
             WHERE dl.partition_id = cs.partition_id AND dl.consumer_group = p_group
               AND dl.retry_requested_at IS NOT NULL
             ORDER BY dl.message_offset, dl.id
             LIMIT remaining
        LOOP
            r.partition_id := cs.partition_id; r.partition_name := cs.pname;
            r.first_offset := d.message_offset; r.created_at := d.message_created_at;
            r.frames := d.frame; r.frame_ends := ARRAY[length(d.frame)];
            r.skip_frames := 0; r.take_frames := 1; r.next_check_at := NULL;
            RETURN NEXT r;
            remaining := remaining - 1;
            retried := retried + 1;
            IF p_auto_ack THEN
                DELETE FROM queen.dead_letters dl WHERE dl.id = d.id;
            ELSE
                UPDATE queen.dead_letters dl SET retry_lease_id = p_lease_id WHERE dl.id = d.id;
            END IF;
        END LOOP;
        IF retried > 0 THEN
            claimed := claimed + 1;
            UPDATE queen.consumer_state st
               SET cursor_offset = cur, retry_count = retries,
                   lease_id = CASE WHEN p_auto_ack THEN NULL ELSE p_lease_id END,
                   lease_expires_at = CASE WHEN p_auto_ack THEN NULL
                                           ELSE now_at + make_interval(secs => lease_secs) END,
                   delivered_until = CASE WHEN p_auto_ack THEN NULL ELSE cur END,
                   not_before = NULL,
                   head_at = queen.head_after(cs.partition_id, cur)
             WHERE st.partition_id = cs.partition_id AND st.consumer_group = p_group;
            CONTINUE;
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
               AND s.first_offset < cur + remaining + coalesce(array_length(hidden, 1), 0)
               AND s.created_at <= cut_at
             ORDER BY s.first_offset
        LOOP
            EXIT WHEN remaining <= 0;
            skip_n := greatest(cur - seg.first_offset, 0)::integer;
            IF hidden IS NOT NULL THEN
                -- Each run of visible frames travels as its own row.
                pos := skip_n;
                WHILE pos < seg.message_count AND remaining > 0 LOOP
                    IF seg.first_offset + pos = ANY (hidden) THEN
                        pos := pos + 1;
                        CONTINUE;
                    END IF;
                    run_from := pos;
                    WHILE pos < seg.message_count AND remaining > 0
                          AND NOT (seg.first_offset + pos = ANY (hidden)) LOOP
                        pos := pos + 1;
                        remaining := remaining - 1;
                    END LOOP;
                    r.partition_id := cs.partition_id; r.partition_name := cs.pname;
                    r.first_offset := seg.first_offset + run_from; r.created_at := seg.created_at;
                    r.frames := queen.frames_between(seg.frames, seg.frame_ends, run_from,
                                                     pos - run_from);
                    r.frame_ends := ARRAY(
                        SELECT e - coalesce(seg.frame_ends[run_from], 0)
                          FROM unnest(seg.frame_ends[run_from + 1 : pos]) e);
                    r.skip_frames := 0; r.take_frames := pos - run_from;
                    r.next_check_at := NULL;
                    RETURN NEXT r;
                    until_off := seg.first_offset + pos;
                END LOOP;
                CONTINUE;
            END IF;
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

-- As in 0015, plus: a delete that lost the race to a concurrent one (both checked before
-- either committed) inserts nothing and returns nothing; and a group stepped past the deleted
-- message starts the next one with no failed deliveries and no retryDelay wait. An expired
-- lease is left for the next claim to judge, as when the claim steps over the message.
CREATE OR REPLACE FUNCTION queen.delete_message(p_partition uuid, p_txid text)
RETURNS TABLE (message_offset bigint, queue_name text) LANGUAGE plpgsql AS $$
DECLARE
    off     bigint;
    low     bigint;
    part    record;
    nxt     bigint;
BEGIN
    SELECT p.next_offset, q.name INTO part
      FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
     WHERE p.id = p_partition;
    IF part IS NULL THEN
        RETURN;
    END IF;
    off := queen.message_offset(p_partition, p_txid, '__QUEUE_MODE__');
    low := coalesce((SELECT s.first_offset FROM queen.segments s
                      WHERE s.partition_id = p_partition ORDER BY s.first_offset LIMIT 1),
                    part.next_offset);
    IF off IS NULL OR off < low OR off >= part.next_offset
       OR EXISTS (SELECT 1 FROM queen.hidden_messages h
                   WHERE h.partition_id = p_partition AND h.message_offset = off) THEN
        RETURN;
    END IF;
    PERFORM 1 FROM queen.consumer_state cs WHERE cs.partition_id = p_partition
      ORDER BY cs.consumer_group FOR UPDATE;
    INSERT INTO queen.hidden_messages (partition_id, message_offset) VALUES (p_partition, off)
        ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        -- A concurrent delete hid it after the check above.
        RETURN;
    END IF;
    DELETE FROM queen.dead_letters d WHERE d.partition_id = p_partition AND d.message_offset = off;
    nxt := off + 1;
    WHILE EXISTS (SELECT 1 FROM queen.hidden_messages h
                   WHERE h.partition_id = p_partition AND h.message_offset = nxt) LOOP
        nxt := nxt + 1;
    END LOOP;
    PERFORM set_config('queen.seek', 'on', true);
    UPDATE queen.consumer_state cs
       SET cursor_offset = nxt, head_at = queen.head_after(p_partition, nxt),
           retry_count = 0, not_before = NULL
     WHERE cs.partition_id = p_partition AND cs.cursor_offset = off
       AND (cs.lease_id IS NULL OR cs.lease_expires_at <= clock_timestamp());
    PERFORM set_config('queen.seek', 'off', true);
    message_offset := off; queue_name := part.name;
    RETURN NEXT;
END;
$$;

-- As in 0015, plus: each retry starts the count of expired leases over.
CREATE OR REPLACE FUNCTION queen.retry_dead_letter(p_partition uuid, p_txid text,
                                                   p_groups text[])
RETURNS TABLE (consumer_group text, queue_name text) LANGUAGE plpgsql AS $$
DECLARE
    d record;
BEGIN
    PERFORM 1 FROM queen.consumer_state cs
     WHERE cs.partition_id = p_partition AND cs.consumer_group = ANY (p_groups)
     ORDER BY cs.consumer_group FOR UPDATE;
    FOR d IN
        SELECT DISTINCT ON (dl.consumer_group) dl.id, dl.consumer_group, dl.message_created_at,
               q.name AS qname
          FROM queen.dead_letters dl
          JOIN queen.queues q ON q.id = dl.queue_id
          JOIN queen.consumer_state cs
            ON cs.partition_id = dl.partition_id AND cs.consumer_group = dl.consumer_group
         WHERE dl.partition_id = p_partition AND dl.transaction_id = p_txid
           AND dl.consumer_group = ANY (p_groups)
         ORDER BY dl.consumer_group, dl.failed_at DESC, dl.id DESC
    LOOP
        UPDATE queen.dead_letters dl
           SET retry_requested_at = clock_timestamp(), retry_lease_id = NULL, retry_expiries = 0
         WHERE dl.id = d.id;
        -- Claimable now, even if the group is caught up.
        UPDATE queen.consumer_state cs
           SET head_at = least(cs.head_at, d.message_created_at)
         WHERE cs.partition_id = p_partition AND cs.consumer_group = d.consumer_group;
        PERFORM pg_notify('queen_push', d.qname);
        consumer_group := d.consumer_group; queue_name := d.qname;
        RETURN NEXT;
    END LOOP;
END;
$$;
