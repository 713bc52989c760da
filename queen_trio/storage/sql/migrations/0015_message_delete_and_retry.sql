-- Message delete and dead-letter retry (issue 9): both change what a claim delivers, so
-- this migration replaces queen.pop_claim (0010's, with the two additions marked below) and
-- puts a layer in front of 0004's ack_batch, renamed queen.ack_cursor. The deleted messages'
-- table (queen.hidden_messages) and the counts that leave them out are 0014's.

-- Whoever dead-letters (a claim, an ack, eviction, an undecodable frame), a deleted message
-- never becomes a dead letter.
CREATE FUNCTION queen.skip_hidden_dead_letter() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM queen.hidden_messages h
                WHERE h.partition_id = NEW.partition_id
                  AND h.message_offset = NEW.message_offset) THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER dead_letters_not_hidden BEFORE INSERT ON queen.dead_letters
    FOR EACH ROW EXECUTE FUNCTION queen.skip_hidden_dead_letter();

-- A retried dead letter: asked for at retry_requested_at, delivered under retry_lease_id
-- (the group's lease on its partition) until an ack settles it.
ALTER TABLE queen.dead_letters
    ADD COLUMN retry_requested_at timestamptz,
    ADD COLUMN retry_lease_id uuid;
CREATE INDEX dead_letters_retried ON queen.dead_letters (partition_id, consumer_group)
    WHERE retry_requested_at IS NOT NULL;

-- A group with retried dead letters has something to claim on the partition even when its
-- cursor is caught up: whoever sets head_at to NULL (acks, claims, eviction) leaves it at the
-- oldest retried dead letter instead.
CREATE FUNCTION queen.keep_retries_claimable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.head_at := (SELECT min(dl.message_created_at) FROM queen.dead_letters dl
                     WHERE dl.partition_id = NEW.partition_id
                       AND dl.consumer_group = NEW.consumer_group
                       AND dl.retry_requested_at IS NOT NULL);
    RETURN NEW;
END;
$$;
CREATE TRIGGER consumer_state_retries_claimable
    BEFORE UPDATE OF head_at ON queen.consumer_state
    FOR EACH ROW WHEN (NEW.head_at IS NULL AND OLD.head_at IS NOT NULL)
    EXECUTE FUNCTION queen.keep_retries_claimable();

-- As in 0010, plus: (1) deleted messages are stepped over at the cursor and cut out of the
-- delivered runs; (2) the group's retried dead letters are delivered first, alone.
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

-- Acks: retried dead letters first (settled against the dead letter, under the lease that
-- delivered them; the cursor is not theirs to move), everything else through 0004's
-- ack_batch, renamed ack_cursor and unchanged. Same arguments, same rows.
ALTER FUNCTION queen.ack_batch(text[], uuid[], text[], text[], uuid[], text[])
    RENAME TO ack_cursor;

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
    n       integer := coalesce(array_length(p_partitions, 1), 0);
    taken   boolean[] := array_fill(false, ARRAY[greatest(n, 1)]);
    rest    integer[];
    it      record;
    pg      record;
    now_at  timestamptz := clock_timestamp();
    settled uuid[] := ARRAY[]::uuid[];
BEGIN
    IF n > 0 AND EXISTS (SELECT 1 FROM queen.dead_letters dl
                          WHERE dl.retry_lease_id IS NOT NULL) THEN
        -- Every state row of the call, in the order every writer locks them (ack_cursor
        -- takes them again without waiting).
        PERFORM 1 FROM queen.consumer_state cs
         WHERE (cs.partition_id, cs.consumer_group) IN (
               SELECT u.p, u.g FROM unnest(p_partitions, p_groups) AS u(p, g))
         ORDER BY cs.partition_id, cs.consumer_group
           FOR UPDATE;
        FOR it IN
            SELECT u.ord::integer AS ord, u.status, u.lease, u.err, dl.id AS dl_id,
                   dl.retry_lease_id, cs.lease_id AS state_lease,
                   cs.lease_expires_at, pp.name AS pname, qq.name AS qname
              FROM unnest(p_partitions, p_groups, p_txids, p_statuses, p_leases, p_errors)
                   WITH ORDINALITY AS u(p, g, txid, status, lease, err, ord)
              JOIN queen.dead_letters dl
                ON dl.partition_id = u.p AND dl.consumer_group = u.g
               AND dl.transaction_id = u.txid AND dl.retry_lease_id IS NOT NULL
              JOIN queen.consumer_state cs
                ON cs.partition_id = u.p AND cs.consumer_group = u.g
              JOIN queen.partitions pp ON pp.id = u.p
              JOIN queen.queues qq ON qq.id = pp.queue_id
             ORDER BY u.p, u.g, u.ord
        LOOP
            taken[it.ord] := true;
            item_no := it.ord; queue_name := it.qname; partition_name := it.pname;
            success := false; error := NULL; lease_released := false; dlq := false;
            released := false;
            IF it.state_lease IS DISTINCT FROM it.retry_lease_id OR it.lease_expires_at <= now_at
               OR (it.lease IS NOT NULL AND it.lease <> it.retry_lease_id) THEN
                error := 'Invalid or expired lease';
            ELSIF it.status IN ('completed', 'success') THEN
                DELETE FROM queen.dead_letters dl WHERE dl.id = it.dl_id;
                success := true;
            ELSIF it.status = 'retry' THEN
                -- Delivered again by the next claim, without counting.
                UPDATE queen.dead_letters dl SET retry_lease_id = NULL WHERE dl.id = it.dl_id;
                success := true;
            ELSIF it.status IN ('failed', 'dlq') THEN
                -- It stays dead for the group, with the newer error.
                UPDATE queen.dead_letters dl
                   SET retry_requested_at = NULL, retry_lease_id = NULL, failed_at = now_at,
                       error_message = coalesce(nullif(it.err, ''), dl.error_message)
                 WHERE dl.id = it.dl_id;
                success := true; dlq := true;
            ELSE
                error := 'Unknown status ' || coalesce(it.status, 'null');
            END IF;
            IF success THEN
                settled := settled || it.retry_lease_id;
            END IF;
            RETURN NEXT;
        END LOOP;
        -- A lease that delivered only retried dead letters ends once they are all settled.
        FOR pg IN
            SELECT cs.partition_id, cs.consumer_group, qq.name AS qname, pp.name AS pname
              FROM queen.consumer_state cs
              JOIN queen.partitions pp ON pp.id = cs.partition_id
              JOIN queen.queues qq ON qq.id = pp.queue_id
             WHERE cs.lease_id = ANY (settled) AND cs.delivered_until <= cs.cursor_offset
               AND NOT EXISTS (SELECT 1 FROM queen.dead_letters dl
                                WHERE dl.partition_id = cs.partition_id
                                  AND dl.consumer_group = cs.consumer_group
                                  AND dl.retry_lease_id = cs.lease_id)
             ORDER BY cs.partition_id, cs.consumer_group
        LOOP
            UPDATE queen.consumer_state cs
               SET lease_id = NULL, lease_expires_at = NULL, delivered_until = NULL,
                   head_at = queen.head_after(pg.partition_id, cs.cursor_offset)
             WHERE cs.partition_id = pg.partition_id AND cs.consumer_group = pg.consumer_group;
            item_no := NULL; success := NULL; error := NULL; queue_name := pg.qname;
            partition_name := pg.pname; lease_released := NULL; dlq := NULL; released := true;
            RETURN NEXT;
            PERFORM pg_notify('queen_push', pg.qname);
        END LOOP;
    END IF;
    IF n = 0 THEN
        RETURN;
    END IF;
    SELECT array_agg(i ORDER BY i) INTO rest FROM generate_series(1, n) i WHERE NOT taken[i];
    IF rest IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
        SELECT rest[a.item_no], a.success, a.error, a.queue_name, a.partition_name,
               a.lease_released, a.dlq, a.released
          FROM queen.ack_cursor(
                ARRAY(SELECT p_groups[i] FROM unnest(rest) WITH ORDINALITY AS x(i, k) ORDER BY k),
                ARRAY(SELECT p_partitions[i] FROM unnest(rest) WITH ORDINALITY AS x(i, k) ORDER BY k),
                ARRAY(SELECT p_txids[i] FROM unnest(rest) WITH ORDINALITY AS x(i, k) ORDER BY k),
                ARRAY(SELECT p_statuses[i] FROM unnest(rest) WITH ORDINALITY AS x(i, k) ORDER BY k),
                ARRAY(SELECT p_leases[i] FROM unnest(rest) WITH ORDINALITY AS x(i, k) ORDER BY k),
                ARRAY(SELECT p_errors[i] FROM unnest(rest) WITH ORDINALITY AS x(i, k) ORDER BY k)) a;
END;
$$;

-- DELETE /api/v1/messages/:partitionId/:transactionId: hide the message (see hidden_messages).
-- Its dead letters go; a group whose cursor stands on it with no live lease steps past it (an
-- operator's move, not consumption). Returns nothing when there is no such message to hide.
CREATE FUNCTION queen.delete_message(p_partition uuid, p_txid text)
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
    INSERT INTO queen.hidden_messages (partition_id, message_offset) VALUES (p_partition, off);
    DELETE FROM queen.dead_letters d WHERE d.partition_id = p_partition AND d.message_offset = off;
    nxt := off + 1;
    WHILE EXISTS (SELECT 1 FROM queen.hidden_messages h
                   WHERE h.partition_id = p_partition AND h.message_offset = nxt) LOOP
        nxt := nxt + 1;
    END LOOP;
    PERFORM set_config('queen.seek', 'on', true);
    UPDATE queen.consumer_state cs
       SET cursor_offset = nxt, head_at = queen.head_after(p_partition, nxt)
     WHERE cs.partition_id = p_partition AND cs.cursor_offset = off
       AND (cs.lease_id IS NULL OR cs.lease_expires_at <= clock_timestamp());
    PERFORM set_config('queen.seek', 'off', true);
    message_offset := off; queue_name := part.name;
    RETURN NEXT;
END;
$$;

-- POST /api/v1/messages/:partitionId/:transactionId/retry: the groups' newest dead letter of
-- the message is delivered again by the group's next claim of the partition (pop_claim).
-- Groups without a position on the partition (deleted since) are left out. Returns the
-- groups whose dead letter will be delivered.
CREATE FUNCTION queen.retry_dead_letter(p_partition uuid, p_txid text, p_groups text[])
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
           SET retry_requested_at = clock_timestamp(), retry_lease_id = NULL
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
