-- Write a bundle of segments (docs/life-of-a-push.md): one call, one transaction, for every
-- segment the push lane, a transaction or a spool replay hands over. One statement resolves
-- every queue and partition with the queue facts (creating only what is missing); one locks
-- the partition rows in id order (the order every writer takes them) and reads, under the
-- lock, what each segment needs (next offset, last commit time). Per segment: the dedup probe
-- of the transaction index within the queue's window, maxSize, the offsets, the commit time
-- (the later of the clock and the partition's last commit), the segment row (rebuilt in one
-- pass when some of its items are duplicates) and its index rows. A duplicate's row carries
-- only its original's message id, so re-pushing a batch costs what the batch weighs.
CREATE OR REPLACE FUNCTION queen.push_bundle(
    p_queues    text[],
    p_partitions text[],
    p_encrypted boolean[],
    p_dedup     boolean[],
    p_counts    integer[],
    p_frames    bytea[],
    p_ends      integer[],
    p_txids     text[],
    -- Spool replay bypasses maxSize (docs/decisions.md#replay): what was accepted must land.
    p_check_max_size boolean DEFAULT true
) RETURNS TABLE (
    segment_no       integer,
    item_no          integer,
    outcome          text,
    partition_id     uuid,
    ref_offset       bigint,
    -- A duplicate's original: its message id, NULL when retention removed its segment.
    ref_message_id   uuid
) LANGUAGE plpgsql
-- Generic plans: PL/pgSQL caches a plan per statement, but under the default plan_cache_mode
-- the planner compared each statement's generic plan (which guesses ten rows for every
-- unnest of the arrays) with a custom plan for one segment's values, found the custom one
-- cheaper, and planned every statement again on every call. Every statement here looks rows
-- up by keys through an index whatever the values, so the generic plan is as good and is
-- planned once per connection (bench/push_bundle.py: about 920 µs of backend CPU per batch-1
-- call before, 600 after).
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    n_segments integer := coalesce(array_length(p_queues, 1), 0);
    seg_ids    uuid[] := array_fill(NULL::uuid, ARRAY[n_segments]);
    seg_start  integer[] := array_fill(0, ARRAY[n_segments]);
    missing    integer;
    attempt    integer := 0;
    s          integer;
    cursor_at  integer := 1;
    commit_at  timestamptz;
    dup_offsets bigint[];
    seg_txids  text[];
    kept_txids text[];
    kept_frames bytea;
    kept_ends  integer[];
    kept_count integer;
    hit_ords   integer[];
    hit_offs   bigint[];
    hit_segs   bigint[];
    k          integer;
    loaded_seg bigint;
    ref_seg_frames bytea;
    ref_seg_ends integer[];
    created_ids uuid[];
    seg_order  integer[];
    new_next   bigint;
    held       bigint;
    q_ids      uuid[];
    q_encrypted boolean[];
    q_windows  integer[];
    q_max_sizes integer[];
    locked_ids uuid[];
    locked_next bigint[];
    locked_last timestamptz[];
    -- Where each locked row lies (kept current as it is updated): the updates go there, for
    -- a look-up by key walks every version of the row that a held xmin keeps.
    locked_at  tid[];
    states_at  tid[];
    moved_at   tid;
    n_partitions bigint;
    q_id       uuid;
    q_window   integer;
    part_next  bigint;
BEGIN
    FOR s IN 1 .. n_segments LOOP
        seg_start[s] := cursor_at;
        cursor_at := cursor_at + p_counts[s];
    END LOOP;

    -- Resolve every queue and partition with the queue facts; create what is missing (then
    -- resolve again); lock the partition rows in id order, reading under the lock what the
    -- segments need. A partition reclaimed between the two steps is simply created again.
    LOOP
        attempt := attempt + 1;
        SELECT array_agg(x.id ORDER BY u.ord), array_agg(qq.id ORDER BY u.ord),
               array_agg(qq.encryption_enabled ORDER BY u.ord),
               array_agg(qq.dedup_window_seconds ORDER BY u.ord),
               array_agg(qq.max_size ORDER BY u.ord), count(DISTINCT x.id)
          INTO seg_ids, q_ids, q_encrypted, q_windows, q_max_sizes, n_partitions
          FROM unnest(p_queues, p_partitions) WITH ORDINALITY AS u(qname, pname, ord)
          LEFT JOIN queen.queues qq ON qq.name = u.qname
          -- A look-up by both keys (OFFSET 0 keeps the planner from folding it into the
          -- join): folded in, the generic plan matched queue_id alone and filtered every
          -- partition of the queue by name. In partition_names, whose rows are never
          -- updated: the partition rows' versions a held xmin keeps are not read here.
          LEFT JOIN LATERAL (SELECT p.id FROM queen.partition_names p
                              WHERE p.queue_id = qq.id AND p.name = u.pname OFFSET 0) x ON true;

        IF array_position(seg_ids, NULL) IS NOT NULL THEN
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
                       SELECT 1 FROM queen.partitions x
                        WHERE x.queue_id = qq.id AND x.name = u.pname)
                ON CONFLICT (queue_id, name) DO NOTHING
                RETURNING id
            )
            SELECT array_agg(id) INTO created_ids FROM created;

            IF created_ids IS NOT NULL THEN
                -- A new partition joins every group already subscribed to its queue. This runs
                -- as its own statement, after the partition insert waited for any join_group
                -- holding the queue row, so it sees that group's subscription.
                INSERT INTO queen.consumer_state
                       (partition_id, consumer_group, queue_id, start_at, cursor_offset)
                SELECT c.id, sub.consumer_group, c.queue_id, sub.start_at, 0
                  FROM queen.partitions c
                  JOIN queen.subscriptions sub ON sub.queue_id = c.queue_id
                 WHERE c.id = ANY (created_ids)
                ON CONFLICT DO NOTHING;
            END IF;
        ELSE
            SELECT array_agg(l.id), array_agg(l.next_offset), array_agg(l.last_commit_at),
                   array_agg(l.ctid)
              INTO locked_ids, locked_next, locked_last, locked_at
              FROM (SELECT pp.id, pp.next_offset, pp.last_commit_at, pp.ctid
                      FROM queen.partitions pp
                     WHERE pp.id = ANY (seg_ids)
                     ORDER BY pp.id
                       FOR UPDATE OF pp) l;
            EXIT WHEN coalesce(array_length(locked_ids, 1), 0) = n_partitions;
        END IF;
        IF attempt >= 5 THEN
            RAISE EXCEPTION 'push_bundle: partitions keep disappearing under the lock';
        END IF;
    END LOOP;

    -- Segments in partition id order: consumer state rows are locked in the same order as
    -- partition rows, by every transaction that locks several.
    IF n_segments = 1 THEN
        seg_order := ARRAY[1];
    ELSE
        SELECT array_agg(u.ord::integer ORDER BY u.id) INTO seg_order
          FROM unnest(seg_ids) WITH ORDINALITY AS u(id, ord);
    END IF;

    FOREACH s IN ARRAY seg_order LOOP
        -- Plain assignments (no statement to run): what the resolve and the lock read.
        q_id := q_ids[s];
        q_window := q_windows[s];
        k := array_position(locked_ids, seg_ids[s]);
        part_next := locked_next[k];

        IF q_encrypted[s] IS DISTINCT FROM p_encrypted[s]
           OR (q_window > 0) IS DISTINCT FROM p_dedup[s] THEN
            segment_no := s; item_no := NULL; outcome := 'stale'; partition_id := seg_ids[s];
            ref_offset := NULL; ref_message_id := NULL;
            RETURN NEXT;
            CONTINUE;
        END IF;

        -- Strictly later than the partition's last commit, by more than a millisecond: the
        -- streaming SDK orders a partition's messages by (createdAt to the millisecond, id),
        -- which must be offset order (docs/decisions.md#commit-times-a-millisecond-apart).
        -- Taken after this transaction's first write (the partition rows' lock): a claim's
        -- floor is never above the start of a transaction writing (functions/pop_claim).
        commit_at := greatest(clock_timestamp(), locked_last[k] + interval '1001 microseconds');
        seg_txids := p_txids[seg_start[s] : seg_start[s] + p_counts[s] - 1];
        dup_offsets := array_fill(NULL::bigint, ARRAY[p_counts[s]]);
        kept_count := p_counts[s];

        IF q_window > 0 THEN
            -- The items whose transaction id is stored within the window, with the stored
            -- segment holding each original (NULL when retention removed it), segment by
            -- segment. Each such segment is read once, however many duplicates it holds, and
            -- only the original's 16-byte id comes back: a duplicate costs what it weighs.
            SELECT array_agg(h.ord ORDER BY h.seg_first, h.ord),
                   array_agg(h.message_offset ORDER BY h.seg_first, h.ord),
                   array_agg(h.seg_first ORDER BY h.seg_first, h.ord)
              INTO hit_ords, hit_offs, hit_segs
              FROM (SELECT u.ord::integer AS ord, t.message_offset,
                           CASE WHEN t.message_offset < sg.first_offset + sg.message_count
                                THEN sg.first_offset END AS seg_first
                      FROM unnest(seg_txids) WITH ORDINALITY AS u(txid, ord)
                      JOIN LATERAL (
                            SELECT ti.message_offset
                              FROM queen.transaction_index ti
                             WHERE ti.partition_id = seg_ids[s]
                               AND ti.transaction_id = u.txid
                               AND ti.created_at > commit_at - make_interval(secs => q_window)
                             ORDER BY ti.message_offset
                             LIMIT 1) t ON true
                      -- The last stored segment starting at or before the original's offset,
                      -- if it still reaches it.
                      LEFT JOIN LATERAL (
                            SELECT s2.first_offset, s2.message_count
                              FROM queen.segments s2
                             WHERE s2.partition_id = seg_ids[s]
                               AND s2.first_offset <= t.message_offset
                             ORDER BY s2.first_offset DESC
                             LIMIT 1) sg ON true) h;
            loaded_seg := NULL;
            FOR k IN 1 .. coalesce(array_length(hit_ords, 1), 0) LOOP
                IF hit_segs[k] IS NOT NULL AND hit_segs[k] IS DISTINCT FROM loaded_seg THEN
                    SELECT s2.frames, s2.frame_ends INTO ref_seg_frames, ref_seg_ends
                      FROM queen.segments s2
                     WHERE s2.partition_id = seg_ids[s] AND s2.first_offset = hit_segs[k];
                    -- SELECT INTO keeps the TOAST pointer, and every substring would then
                    -- decompress the segment again: make it a plain value, once.
                    ref_seg_frames := ref_seg_frames || ''::bytea;
                    loaded_seg := hit_segs[k];
                END IF;
                dup_offsets[hit_ords[k]] := hit_offs[k];
                kept_count := kept_count - 1;
                segment_no := s; item_no := hit_ords[k]; outcome := 'duplicate';
                partition_id := seg_ids[s]; ref_offset := hit_offs[k];
                -- A frame starts with its message id (queen_trio/storage/frames.py).
                ref_message_id := CASE WHEN hit_segs[k] IS NOT NULL THEN encode(substring(
                    ref_seg_frames
                    FROM coalesce(ref_seg_ends[(hit_offs[k] - hit_segs[k])::integer], 0) + 1
                    FOR 16), 'hex')::uuid END;
                RETURN NEXT;
            END LOOP;
        END IF;

        IF kept_count = p_counts[s] THEN
            kept_frames := p_frames[s];
            kept_txids := seg_txids;
            kept_ends := p_ends[seg_start[s] : seg_start[s] + p_counts[s] - 1];
        ELSE
            -- Rebuild the segment from the frames that were not duplicates, in one pass.
            kept_frames := p_frames[s];
            SELECT coalesce(string_agg(substring(kept_frames FROM f.start_at + 1 FOR f.len),
                                       ''::bytea ORDER BY f.i), ''::bytea),
                   coalesce(array_agg(f.txid ORDER BY f.i), ARRAY[]::text[]),
                   coalesce(array_agg(f.kept_end ORDER BY f.i), ARRAY[]::integer[])
              INTO kept_frames, kept_txids, kept_ends
              FROM (SELECT g.i, g.start_at, g.stop_at - g.start_at AS len,
                           p_txids[seg_start[s] + g.i - 1] AS txid,
                           (sum(g.stop_at - g.start_at) OVER (ORDER BY g.i))::integer AS kept_end
                      FROM (SELECT i,
                                   CASE WHEN i = 1 THEN 0
                                        ELSE p_ends[seg_start[s] + i - 2] END AS start_at,
                                   p_ends[seg_start[s] + i - 1] AS stop_at
                              FROM generate_series(1, p_counts[s]) AS i
                             WHERE dup_offsets[i] IS NULL) g) f;
        END IF;

        IF kept_count > 0 AND q_max_sizes[s] > 0 AND p_check_max_size THEN
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
              FROM queen.partitions pp WHERE pp.queue_id = q_id;
            IF held + kept_count > q_max_sizes[s] THEN
                segment_no := s; item_no := NULL; outcome := 'full'; partition_id := seg_ids[s];
                ref_offset := NULL; ref_message_id := NULL;
                RETURN NEXT;
                CONTINUE;
            END IF;
        END IF;

        IF kept_count > 0 THEN
            INSERT INTO queen.segments
                   (partition_id, first_offset, message_count, created_at, frames, frame_ends)
            VALUES (seg_ids[s], part_next, kept_count, commit_at, kept_frames, kept_ends);

            INSERT INTO queen.transaction_index (partition_id, transaction_id, message_offset, created_at)
            SELECT seg_ids[s], u.txid, part_next + u.ord - 1, commit_at
              FROM unnest(kept_txids) WITH ORDINALITY AS u(txid, ord);

            UPDATE queen.partitions
               SET next_offset = next_offset + kept_count,
                   last_commit_at = commit_at,
                   last_write_at = commit_at
             WHERE ctid = locked_at[k]
            RETURNING ctid INTO moved_at;
            IF NOT FOUND THEN RAISE EXCEPTION 'push_bundle: a partition row moved under its lock'; END IF;
            locked_at[k] := moved_at;

            new_next := part_next + kept_count;
            -- Every group's row, locked; then the caught-up ones (the lock read the latest).
            SELECT array_agg(l.ctid) FILTER (WHERE l.head_at IS NULL) INTO states_at
              FROM (SELECT cs.ctid, cs.head_at FROM queen.consumer_state cs
                     WHERE cs.partition_id = seg_ids[s] FOR UPDATE) l;
            -- A caught-up group now has something pending; a group whose subscription starts
            -- after this commit skips it.
            UPDATE queen.consumer_state cs
               SET head_at = CASE WHEN cs.start_at IS NULL OR commit_at >= cs.start_at
                                  THEN commit_at END,
                   cursor_offset = CASE WHEN cs.start_at IS NULL OR commit_at >= cs.start_at
                                        THEN cs.cursor_offset ELSE new_next END
             WHERE cs.ctid = ANY (states_at) AND cs.head_at IS NULL;
            PERFORM pg_notify('queen_push', p_queues[s]);
        END IF;

        segment_no := s; item_no := NULL; outcome := 'queued'; partition_id := seg_ids[s];
        ref_offset := part_next; ref_message_id := NULL;
        RETURN NEXT;
    END LOOP;
END;
$$;
