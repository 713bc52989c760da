-- Claim up to p_max_partitions partitions of a queue (or the one named) with something
-- deliverable for the group, oldest pending first, skipping locked rows; lease each under
-- p_lease_id and return the segments to deliver (skip/take frames of each, and where each
-- frame ends). With nothing claimed, one row with only next_check_at: when something may next
-- become deliverable. Expired leases count as failed deliveries (retryLimit, then the DLQ).
-- Deleted messages (queen.hidden_messages) are stepped over at the cursor, with the retry
-- counter reset, and cut out of the delivered runs. A group's retried dead letters are
-- delivered first, alone; their expired leases are counted, and after retryLimit + 1 they are
-- ordinary dead letters again. A claim never outlives its delivery (docs/api.md: Pops): what
-- the broker cannot decode goes through queen.dead_letter_undecodable, and a reply that
-- cannot be sent gives the lease back through queen.release_lease.
-- Conflation (docs/decisions.md#conflation): p_conflation, when not NULL, states the group's
-- policy; the first pop that states one stores it on the subscription, and the stored one
-- applies. A conflating group is given, per partition, only the newest deliverable message:
-- its cursor moves past the older ones (superseded: consumed, never dead-lettered) under the
-- partition's lease. Every row carries the stored policy, and each claimed partition's first
-- row how many it superseded.
--
-- The claim's floor (docs/performance.md#the-claims-floor): the scan of pending partitions
-- starts at the group's claim_floor, a time at or below every head_at of the group, so it
-- never steps over the dead index entries of rows that moved on, which pile up below the live
-- ones while the xmin horizon is held back. A claim raises it every 2 s (one claim at a time,
-- in the pop's transaction) to the oldest head_at, but never above the start of a transaction
-- writing at the time; whoever sets a head_at below it forgets it
-- (triggers/consumer_state_floor), and the next claim finds it again from the start.
--
-- Pending partitions are found in queen.consumer_heads (migration 0011), which the state
-- rows' triggers keep: no index of consumer_state holds head_at or lease_id, so the claim's
-- and the ack's updates of a state row are HOT. A head leased or delayed (not_until) is
-- passed over without reading its state row; a candidate is claimed only if its row, as
-- locked, still has the head the scan found it by (one that moved since is the next
-- claim's) and no live lease or retryDelay.
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
    p_start_from     timestamptz,
    p_conflation     boolean DEFAULT NULL
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
    policy     boolean;
    newest     bigint;
    at_off     bigint;
    jumped     boolean;
    sup        bigint;
    rest       integer;
    expired    boolean;
    floor_at   timestamptz;
    floor_set  timestamptz;
    floor_was  timestamptz;
    writing_from timestamptz;
    part_id    uuid;
    pname      text;
    candidates refcursor;
BEGIN
    SELECT qq.id, qq.lease_time, qq.delayed_processing, qq.window_buffer, qq.retry_limit,
           qq.dead_letter_queue
      INTO q FROM queen.queues qq WHERE qq.name = p_queue;
    IF q IS NULL THEN
        RETURN;
    END IF;
    SELECT s.conflation, s.claim_floor, s.claim_floor_at INTO policy, floor_at, floor_set
      FROM queen.subscriptions s
     WHERE s.queue_id = q.id AND s.consumer_group = p_group;
    IF NOT FOUND THEN
        PERFORM queen.join_group(q.id, p_group, CASE p_start_mode
            WHEN 'new' THEN now_at WHEN 'from' THEN p_start_from END);
    END IF;
    IF policy IS NULL AND p_conflation IS NOT NULL THEN
        -- The first pop that states a policy stores it; a racing one that stated the other
        -- finds it stored (the row's lock orders them) and gets the stored one.
        UPDATE queen.subscriptions s SET conflation = p_conflation
         WHERE s.queue_id = q.id AND s.consumer_group = p_group AND s.conflation IS NULL;
        SELECT s.conflation INTO policy FROM queen.subscriptions s
         WHERE s.queue_id = q.id AND s.consumer_group = p_group;
    END IF;
    IF floor_set IS NULL OR floor_set < now_at - interval '2 seconds' THEN
        -- Raise the floor, unless another claim is at it (or a writer forgetting it holds the
        -- row: its head_at is not visible yet, and the floor read stays a lower bound).
        -- Holding the row while claiming cannot deadlock with such a writer, which holds a
        -- state row and waits here: the claim never waits for a state row (SKIP LOCKED).
        SELECT s.claim_floor INTO floor_was FROM queen.subscriptions s
         WHERE s.queue_id = q.id AND s.consumer_group = p_group
           FOR NO KEY UPDATE SKIP LOCKED;
        IF FOUND THEN
            -- No higher than the start of any transaction writing now: a push takes its
            -- commit time (the head_at it may set) after its first write, so one this claim
            -- cannot see yet sets a head_at no older than its start. Read before the heads,
            -- so that a writer gone from this list is visible to them.
            SELECT min(a.xact_start) INTO writing_from FROM pg_stat_activity a
             WHERE a.datname = current_database() AND a.backend_xid IS NOT NULL
               AND a.backend_type = 'client backend' AND a.pid <> pg_backend_pid();
            -- Every head_at is at or above the floor read under the lock (a writer that set
            -- one below it forgot it first): the oldest is found from there.
            SELECT min(h.head_at) INTO floor_at
              FROM queen.consumer_heads h
             WHERE h.queue_id = q.id AND h.consumer_group = p_group
               AND h.head_at >= coalesce(floor_was, '-infinity');
            floor_at := least(floor_at, writing_from, now_at);
            UPDATE queen.subscriptions s SET claim_floor = floor_at, claim_floor_at = now_at
             WHERE s.queue_id = q.id AND s.consumer_group = p_group;
        END IF;
    END IF;
    floor_at := coalesce(floor_at, '-infinity');
    r.conflation := policy;
    r.superseded := 0;
    IF p_partition IS NOT NULL THEN
        SELECT p.id INTO part_id FROM queen.partition_names p
         WHERE p.queue_id = q.id AND p.name = p_partition;
        IF part_id IS NULL THEN
            -- No such partition (yet): nothing to claim, no time to look again.
            RETURN NEXT r;
            RETURN;
        END IF;
    END IF;
    cut_at := now_at - make_interval(secs => q.delayed_processing);
    lease_secs := CASE WHEN q.lease_time > 0 THEN q.lease_time ELSE 60 END;

    -- The partition rows are read only for a window buffer (a claimed partition's name is
    -- read from partition_names): every push updates its partition's row, so under a held
    -- xmin each read of one walks its versions, and a join here read them for every
    -- candidate. Two forms of the scan, so that each keeps one generic plan: one query with
    -- "no window buffer, or a partition row past it" was planned again at every claim (a
    -- custom plan without the lookup looked cheaper than the generic plan with it;
    -- bench/claim_statements.py).
    IF q.window_buffer = 0 THEN
        OPEN candidates FOR
            SELECT st.partition_id, st.cursor_offset, st.lease_id, st.delivered_until,
                   st.retry_count, st.ctid AS row_at
              FROM queen.consumer_heads h
              JOIN queen.consumer_state st
                ON st.partition_id = h.partition_id AND st.consumer_group = h.consumer_group
             WHERE h.queue_id = q.id AND h.consumer_group = p_group
               AND (part_id IS NULL OR h.partition_id = part_id)
               AND h.head_at >= floor_at AND h.head_at <= cut_at
               AND (h.not_until IS NULL OR h.not_until <= now_at)
               AND st.head_at = h.head_at
               AND (st.lease_expires_at IS NULL OR st.lease_expires_at <= now_at)
               AND (st.not_before IS NULL OR st.not_before <= now_at)
             ORDER BY h.head_at, h.partition_id
             LIMIT greatest(p_max_partitions, 1)
               FOR UPDATE OF st SKIP LOCKED;
    ELSE
        OPEN candidates FOR
            SELECT st.partition_id, st.cursor_offset, st.lease_id, st.delivered_until,
                   st.retry_count, st.ctid AS row_at
              FROM queen.consumer_heads h
              JOIN queen.consumer_state st
                ON st.partition_id = h.partition_id AND st.consumer_group = h.consumer_group
              JOIN queen.partitions p ON p.id = h.partition_id
             WHERE h.queue_id = q.id AND h.consumer_group = p_group
               AND (part_id IS NULL OR h.partition_id = part_id)
               AND h.head_at >= floor_at AND h.head_at <= cut_at
               AND (h.not_until IS NULL OR h.not_until <= now_at)
               AND st.head_at = h.head_at
               AND (st.lease_expires_at IS NULL OR st.lease_expires_at <= now_at)
               AND (st.not_before IS NULL OR st.not_before <= now_at)
               AND p.last_commit_at <= now_at - make_interval(secs => q.window_buffer)
             ORDER BY h.head_at, h.partition_id
             LIMIT greatest(p_max_partitions, 1)
               FOR UPDATE OF st SKIP LOCKED;
    END IF;
    -- Each claimed row is updated once, where it lies (row_at, locked by the scan): a look-up
    -- by key walks every version of the row that a held xmin keeps.
    LOOP
        FETCH candidates INTO cs;
        EXIT WHEN NOT FOUND;
        EXIT WHEN remaining <= 0;
        IF p_partition IS NOT NULL THEN
            pname := p_partition;
        ELSE
            SELECT p.name INTO pname FROM queen.partition_names p WHERE p.id = cs.partition_id;
        END IF;
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
                -- The failed deliveries counted were the deleted message's.
                retries := 0;
            END IF;
        END IF;
        -- A conflating group skips to the newest deliverable message: the older ones are
        -- superseded (the cursor moves past them as consumed; deleted ones are not counted),
        -- and the failed deliveries counted were a superseded message's.
        jumped := false;
        sup := 0;
        IF policy THEN
            newest := NULL;
            FOR seg IN
                SELECT s.first_offset, s.message_count
                  FROM queen.segments s
                 WHERE s.partition_id = cs.partition_id
                   AND s.first_offset + s.message_count > cur
                   AND s.created_at <= cut_at
                 ORDER BY s.first_offset DESC
            LOOP
                at_off := seg.first_offset + seg.message_count - 1;
                WHILE hidden IS NOT NULL AND at_off >= greatest(seg.first_offset, cur)
                      AND at_off = ANY (hidden) LOOP
                    at_off := at_off - 1;
                END LOOP;
                IF at_off >= greatest(seg.first_offset, cur) THEN
                    newest := at_off;
                    EXIT;
                END IF;
            END LOOP;
            IF newest > cur THEN
                sup := newest - cur - (SELECT count(*) FROM unnest(hidden) h
                                        WHERE h >= cur AND h < newest);
                cur := newest;
                retries := 0;
                jumped := true;
            END IF;
        END IF;

        -- A lease that expired with messages unsettled was a failed delivery; not for a
        -- streams query's source group, whose gate lets leases expire on purpose
        -- (docs/decisions.md#streams-lease-expiries). The lookup is a test of its own: in
        -- one condition with the row's fields, every claim planned it again (a custom plan
        -- per call, 30 µs), where a test with no query runs as a plain expression.
        IF NOT jumped AND cs.lease_id IS NOT NULL AND cs.delivered_until > cur THEN
            expired := NOT EXISTS (SELECT 1 FROM queen.stream_groups sg
                                    WHERE sg.queue_name = p_queue AND sg.consumer_group = p_group);
        ELSE
            expired := false;
        END IF;
        IF expired THEN
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
        -- partition.
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
            r.partition_id := cs.partition_id; r.partition_name := pname;
            r.first_offset := d.message_offset; r.created_at := d.message_created_at;
            r.frames := d.frame; r.frame_ends := ARRAY[length(d.frame)];
            r.skip_frames := 0; r.take_frames := 1; r.next_check_at := NULL;
            r.superseded := sup; sup := 0;
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
             WHERE st.ctid = cs.row_at;
            IF NOT FOUND THEN RAISE EXCEPTION 'pop_claim: a state row moved under its lock'; END IF;
            CONTINUE;
        END IF;

        IF policy THEN
            -- One message per partition: the newest (the cursor is at it now).
            rest := remaining;
            remaining := 1;
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
                    r.partition_id := cs.partition_id; r.partition_name := pname;
                    r.first_offset := seg.first_offset + run_from; r.created_at := seg.created_at;
                    r.frames := queen.frames_between(seg.frames, seg.frame_ends, run_from,
                                                     pos - run_from);
                    r.frame_ends := ARRAY(
                        SELECT e - coalesce(seg.frame_ends[run_from], 0)
                          FROM unnest(seg.frame_ends[run_from + 1 : pos]) e);
                    r.skip_frames := 0; r.take_frames := pos - run_from;
                    r.next_check_at := NULL;
                    r.superseded := sup; sup := 0;
                    RETURN NEXT r;
                    until_off := seg.first_offset + pos;
                END LOOP;
                CONTINUE;
            END IF;
            take_n := least(seg.message_count - skip_n, remaining);
            -- Only the delivered frames travel: skip_frames is 0 in what is returned.
            r.partition_id := cs.partition_id; r.partition_name := pname;
            r.first_offset := seg.first_offset + skip_n; r.created_at := seg.created_at;
            r.frames := queen.frames_between(seg.frames, seg.frame_ends, skip_n, take_n);
            -- Where each delivered frame ends within r.frames: the broker decodes every frame
            -- on its own, so one it cannot read never hides the next.
            r.frame_ends := ARRAY(SELECT e - coalesce(seg.frame_ends[skip_n], 0)
                                    FROM unnest(seg.frame_ends[skip_n + 1 : skip_n + take_n]) e);
            r.skip_frames := 0; r.take_frames := take_n;
            r.next_check_at := NULL;
            r.superseded := sup; sup := 0;
            RETURN NEXT r;
            remaining := remaining - take_n;
            until_off := seg.first_offset + skip_n + take_n;
        END LOOP;
        IF policy THEN
            remaining := rest - (1 - remaining);
        END IF;

        IF until_off = cur THEN
            -- Nothing deliverable after all (a dead-lettered poison message was the last).
            UPDATE queen.consumer_state st
               SET cursor_offset = cur, retry_count = retries, lease_id = NULL,
                   lease_expires_at = NULL, delivered_until = NULL,
                   head_at = queen.head_after(cs.partition_id, cur)
             WHERE st.ctid = cs.row_at;
            IF NOT FOUND THEN RAISE EXCEPTION 'pop_claim: a state row moved under its lock'; END IF;
            CONTINUE;
        END IF;
        claimed := claimed + 1;
        IF p_auto_ack THEN
            UPDATE queen.consumer_state st
               SET cursor_offset = until_off, retry_count = 0, lease_id = NULL,
                   lease_expires_at = NULL, delivered_until = NULL, not_before = NULL,
                   head_at = queen.head_after(cs.partition_id, until_off)
             WHERE st.ctid = cs.row_at;
            IF NOT FOUND THEN RAISE EXCEPTION 'pop_claim: a state row moved under its lock'; END IF;
        ELSE
            UPDATE queen.consumer_state st
               SET cursor_offset = cur, retry_count = retries, lease_id = p_lease_id,
                   lease_expires_at = now_at + make_interval(secs => lease_secs),
                   delivered_until = until_off, not_before = NULL,
                   head_at = CASE WHEN cur = cs.cursor_offset THEN st.head_at
                                  ELSE queen.head_after(cs.partition_id, cur) END
             WHERE st.ctid = cs.row_at;
            IF NOT FOUND THEN RAISE EXCEPTION 'pop_claim: a state row moved under its lock'; END IF;
        END IF;
    END LOOP;
    CLOSE candidates;

    IF claimed = 0 THEN
        -- When might something become deliverable? (the long poll parks until then at most)
        -- From the heads alone (and the partition rows only for a window buffer): under a
        -- held xmin each state row read walks every version of it.
        SELECT min(greatest(h.head_at + make_interval(secs => q.delayed_processing),
                            coalesce(h.not_until, '-infinity'),
                            CASE WHEN q.window_buffer > 0
                                 THEN (SELECT p.last_commit_at
                                              + make_interval(secs => q.window_buffer)
                                         FROM queen.partitions p WHERE p.id = h.partition_id)
                                 ELSE '-infinity' END))
          INTO r.next_check_at
          FROM queen.consumer_heads h
         WHERE h.queue_id = q.id AND h.consumer_group = p_group
           AND (part_id IS NULL OR h.partition_id = part_id)
           AND h.head_at >= floor_at;
        r.partition_id := NULL; r.partition_name := NULL; r.first_offset := NULL; r.created_at := NULL;
        r.frames := NULL; r.skip_frames := NULL; r.take_frames := NULL; r.frame_ends := NULL;
        r.superseded := 0;
        RETURN NEXT r;
    END IF;
END;
$$;
