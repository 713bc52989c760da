-- A group's first contact with a queue: record its start and give it a state row on every
-- partition. The queue row's lock orders this against pushes creating partitions. A start
-- remembered by a group deleted with deleteMetadata=false (queen.subscription_memory) wins
-- over the request's.
CREATE OR REPLACE FUNCTION queen.join_group(p_queue_id uuid, p_group text, p_start timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    joined     integer;
    remembered timestamptz;
BEGIN
    PERFORM 1 FROM queen.queues WHERE id = p_queue_id FOR UPDATE;
    -- Wait for the pushes committing into the queue's partitions (they hold the partition
    -- rows): the group's cursors and heads are then read from what they committed, never
    -- from a state where a later push is visible and an earlier one not yet.
    PERFORM 1 FROM queen.partitions p WHERE p.queue_id = p_queue_id ORDER BY p.id FOR KEY SHARE;
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
