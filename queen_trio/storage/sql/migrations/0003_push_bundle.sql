-- One bundle of segments, one transaction, one round trip (DESIGN: Life of a push, step 5).
--
-- Segment s carries p_counts[s] frames packed in p_frames[s]; the frames' lengths and
-- transaction ids are the matching slices of p_ends (the byte where each frame ends within its
-- segment) and p_txids. p_encrypted[s] and
-- p_dedup[s] are what the broker assumed about the queue when it packed the segment: a
-- mismatch (another broker reconfigured the queue) answers 'stale' and writes nothing, so the
-- broker can repack.
--
-- Per segment the function: locks the partition row (all rows in ascending id order, so two
-- brokers or a transaction can never deadlock), takes the commit time after the lock (the later
-- of the wall clock and the partition's last commit), probes the transaction index within the
-- dedup window (a hit writes nothing), allocates offsets and writes the segment and its index
-- rows.
--
-- Rows returned: one 'queued', 'stale' or 'full' (maxSize) row per segment (item_no NULL), and
-- one 'duplicate' row per item found in the index, with the original's offset and the stored segment holding
-- it (NULL frames when retention removed it).
--
-- For consumers, per written segment: the state rows of every group on the partition are
-- locked (in partition id order, like the partition rows) and a caught-up group's head_at is
-- set, so the claim index sees the new messages; a NOTIFY on 'queen_push' (payload: the queue
-- name) tells other brokers' long polls at commit.
CREATE FUNCTION queen.push_bundle(
    p_queues    text[],
    p_partitions text[],
    p_encrypted boolean[],
    p_dedup     boolean[],
    p_counts    integer[],
    p_frames    bytea[],
    p_ends      integer[],
    p_txids     text[],
    -- Spool replay bypasses maxSize (DECISIONS: Spool): what was accepted must land.
    p_check_max_size boolean DEFAULT true
) RETURNS TABLE (
    segment_no       integer,
    item_no          integer,
    outcome          text,
    partition_id     uuid,
    ref_offset       bigint,
    ref_first_offset bigint,
    ref_frames       bytea
) LANGUAGE plpgsql AS $$
DECLARE
    n_segments integer := coalesce(array_length(p_queues, 1), 0);
    seg_ids    uuid[] := array_fill(NULL::uuid, ARRAY[n_segments]);
    seg_start  integer[] := array_fill(0, ARRAY[n_segments]);
    missing    integer;
    attempt    integer := 0;
    s          integer;
    i          integer;
    pos        integer;
    cursor_at  integer := 1;
    q          record;
    part       record;
    commit_at  timestamptz;
    dup_offsets bigint[];
    seg_txids  text[];
    kept_txids text[];
    kept_frames bytea;
    kept_ends  integer[];
    frame_at   integer;
    frame_len  integer;
    kept_count integer;
    hit        record;
    created_ids uuid[];
    seg_order  integer[];
    new_next   bigint;
    held       bigint;
BEGIN
    FOR s IN 1 .. n_segments LOOP
        seg_start[s] := cursor_at;
        cursor_at := cursor_at + p_counts[s];
    END LOOP;

    -- Resolve (and create) queues and partitions, then lock the partition rows in id order.
    -- A partition reclaimed between the two steps is simply created again.
    LOOP
        attempt := attempt + 1;
        INSERT INTO queen.queues (name, namespace, task)
        SELECT DISTINCT u.qname, split_part(u.qname, '.', 1), split_part(u.qname, '.', 2)
          FROM unnest(p_queues) AS u(qname)
         WHERE NOT EXISTS (SELECT 1 FROM queen.queues x WHERE x.name = u.qname)
        ON CONFLICT (name) DO NOTHING;

        WITH created AS (
            INSERT INTO queen.partitions (queue_id, name)
            SELECT qq.id, u.pname
              FROM unnest(p_queues, p_partitions) AS u(qname, pname)
              JOIN queen.queues qq ON qq.name = u.qname
             WHERE NOT EXISTS (
                   SELECT 1 FROM queen.partitions x WHERE x.queue_id = qq.id AND x.name = u.pname)
            ON CONFLICT (queue_id, name) DO NOTHING
            RETURNING id
        )
        SELECT array_agg(id) INTO created_ids FROM created;

        IF created_ids IS NOT NULL THEN
            -- A new partition joins every group already subscribed to its queue. This runs as
            -- its own statement, after the partition insert waited for any join_group holding
            -- the queue row, so it sees that group's subscription.
            INSERT INTO queen.consumer_state
                   (partition_id, consumer_group, queue_id, start_at, cursor_offset)
            SELECT c.id, sub.consumer_group, c.queue_id, sub.start_at, 0
              FROM queen.partitions c
              JOIN queen.subscriptions sub ON sub.queue_id = c.queue_id
             WHERE c.id = ANY (created_ids)
            ON CONFLICT DO NOTHING;
        END IF;

        PERFORM 1
           FROM queen.partitions pp
          WHERE pp.id IN (
                SELECT x.id
                  FROM unnest(p_queues, p_partitions) AS u(qname, pname)
                  JOIN queen.queues qq ON qq.name = u.qname
                  JOIN queen.partitions x ON x.queue_id = qq.id AND x.name = u.pname)
          ORDER BY pp.id
            FOR UPDATE OF pp;

        SELECT array_agg(x.id ORDER BY u.ord)
          INTO seg_ids
          FROM unnest(p_queues, p_partitions) WITH ORDINALITY AS u(qname, pname, ord)
          LEFT JOIN queen.queues qq ON qq.name = u.qname
          LEFT JOIN queen.partitions x ON x.queue_id = qq.id AND x.name = u.pname;

        SELECT count(*) INTO missing FROM unnest(seg_ids) AS v(id) WHERE v.id IS NULL;
        EXIT WHEN missing = 0;
        IF attempt >= 5 THEN
            RAISE EXCEPTION 'push_bundle: partitions keep disappearing under the lock';
        END IF;
    END LOOP;

    -- Segments in partition id order: consumer state rows are locked in the same order as
    -- partition rows, by every transaction that locks several.
    SELECT array_agg(u.ord::integer ORDER BY u.id) INTO seg_order
      FROM unnest(seg_ids) WITH ORDINALITY AS u(id, ord);

    FOREACH s IN ARRAY seg_order LOOP
        SELECT qq.id, qq.encryption_enabled, qq.dedup_window_seconds, qq.max_size
          INTO q
          FROM queen.queues qq WHERE qq.name = p_queues[s];
        SELECT pp.next_offset, pp.last_commit_at
          INTO part
          FROM queen.partitions pp WHERE pp.id = seg_ids[s];

        IF q.encryption_enabled IS DISTINCT FROM p_encrypted[s]
           OR (q.dedup_window_seconds > 0) IS DISTINCT FROM p_dedup[s] THEN
            segment_no := s; item_no := NULL; outcome := 'stale'; partition_id := seg_ids[s];
            ref_offset := NULL; ref_first_offset := NULL; ref_frames := NULL;
            RETURN NEXT;
            CONTINUE;
        END IF;

        commit_at := greatest(clock_timestamp(), part.last_commit_at);
        seg_txids := p_txids[seg_start[s] : seg_start[s] + p_counts[s] - 1];
        dup_offsets := array_fill(NULL::bigint, ARRAY[p_counts[s]]);
        kept_count := p_counts[s];

        IF q.dedup_window_seconds > 0 THEN
            FOR hit IN
                SELECT u.ord::integer AS ord, t.message_offset,
                       CASE WHEN t.message_offset < sg.first_offset + sg.message_count
                            THEN sg.first_offset END AS first_offset,
                       CASE WHEN t.message_offset < sg.first_offset + sg.message_count
                            THEN sg.frames END AS frames
                  FROM unnest(seg_txids) WITH ORDINALITY AS u(txid, ord)
                  JOIN LATERAL (
                        SELECT ti.message_offset
                          FROM queen.transaction_index ti
                         WHERE ti.partition_id = seg_ids[s]
                           AND ti.transaction_id = u.txid
                           AND ti.created_at > commit_at - make_interval(secs => q.dedup_window_seconds)
                         ORDER BY ti.message_offset
                         LIMIT 1) t ON true
                  -- The stored segment holding the original: the last one starting at or
                  -- before its offset, if it still reaches it (retention may have removed it).
                  LEFT JOIN LATERAL (
                        SELECT s2.first_offset, s2.message_count, s2.frames
                          FROM queen.segments s2
                         WHERE s2.partition_id = seg_ids[s]
                           AND s2.first_offset <= t.message_offset
                         ORDER BY s2.first_offset DESC
                         LIMIT 1) sg ON true
            LOOP
                dup_offsets[hit.ord] := hit.message_offset;
                kept_count := kept_count - 1;
                segment_no := s; item_no := hit.ord; outcome := 'duplicate';
                partition_id := seg_ids[s]; ref_offset := hit.message_offset;
                ref_first_offset := hit.first_offset; ref_frames := hit.frames;
                RETURN NEXT;
            END LOOP;
        END IF;

        IF kept_count = p_counts[s] THEN
            kept_frames := p_frames[s];
            kept_txids := seg_txids;
            kept_ends := p_ends[seg_start[s] : seg_start[s] + p_counts[s] - 1];
        ELSE
            -- Rebuild the segment from the frames that were not duplicates.
            kept_frames := ''::bytea;
            kept_txids := ARRAY[]::text[];
            kept_ends := ARRAY[]::integer[];
            frame_at := 0;
            FOR i IN 1 .. p_counts[s] LOOP
                pos := seg_start[s] + i - 1;
                frame_len := p_ends[pos] - frame_at;
                IF dup_offsets[i] IS NULL THEN
                    kept_frames := kept_frames || substring(p_frames[s] FROM frame_at + 1 FOR frame_len);
                    kept_txids := kept_txids || p_txids[pos];
                    kept_ends := kept_ends || length(kept_frames);
                END IF;
                frame_at := p_ends[pos];
            END LOOP;
        END IF;

        IF kept_count > 0 AND q.max_size > 0 AND p_check_max_size THEN
            -- maxSize: what the queue holds that its slowest group has not consumed (all of
            -- it on a partition no group reads). A group that would pass it fails whole. Only
            -- this partition is locked, so concurrent pushes to other partitions make it a
            -- soft bound.
            SELECT coalesce(sum(pp.next_offset - coalesce(
                       (SELECT min(cs.cursor_offset) FROM queen.consumer_state cs
                         WHERE cs.partition_id = pp.id),
                       (SELECT min(sg.first_offset) FROM queen.segments sg
                         WHERE sg.partition_id = pp.id),
                       pp.next_offset)), 0)
              INTO held
              FROM queen.partitions pp WHERE pp.queue_id = q.id;
            IF held + kept_count > q.max_size THEN
                segment_no := s; item_no := NULL; outcome := 'full'; partition_id := seg_ids[s];
                ref_offset := NULL; ref_first_offset := NULL; ref_frames := NULL;
                RETURN NEXT;
                CONTINUE;
            END IF;
        END IF;

        IF kept_count > 0 THEN
            INSERT INTO queen.segments
                   (partition_id, first_offset, message_count, created_at, frames, frame_ends)
            VALUES (seg_ids[s], part.next_offset, kept_count, commit_at, kept_frames, kept_ends);

            INSERT INTO queen.transaction_index (partition_id, transaction_id, message_offset, created_at)
            SELECT seg_ids[s], u.txid, part.next_offset + u.ord - 1, commit_at
              FROM unnest(kept_txids) WITH ORDINALITY AS u(txid, ord);

            UPDATE queen.partitions
               SET next_offset = next_offset + kept_count,
                   last_commit_at = commit_at,
                   last_write_at = commit_at
             WHERE id = seg_ids[s];

            new_next := part.next_offset + kept_count;
            PERFORM 1 FROM queen.consumer_state cs WHERE cs.partition_id = seg_ids[s] FOR UPDATE;
            -- A caught-up group now has something pending; a group whose subscription starts
            -- after this commit skips it.
            UPDATE queen.consumer_state cs
               SET head_at = CASE WHEN cs.start_at IS NULL OR commit_at >= cs.start_at
                                  THEN commit_at END,
                   cursor_offset = CASE WHEN cs.start_at IS NULL OR commit_at >= cs.start_at
                                        THEN cs.cursor_offset ELSE new_next END
             WHERE cs.partition_id = seg_ids[s] AND cs.head_at IS NULL;
            PERFORM pg_notify('queen_push', p_queues[s]);
        END IF;

        segment_no := s; item_no := NULL; outcome := 'queued'; partition_id := seg_ids[s];
        ref_offset := part.next_offset; ref_first_offset := NULL; ref_frames := NULL;
        RETURN NEXT;
    END LOOP;
END;
$$;
