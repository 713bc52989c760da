-- A timer fire's view of its destination partitions (docs/decisions.md#timers): for each
-- (queue, partition) that exists, its row locked (in id order, the order every writer takes
-- partition rows) and the message id of its newest message (NULL when it holds none), so
-- that the fire gives its messages ids that sort after it. push_bundle takes the same locks
-- again in the same transaction, which costs nothing.
CREATE OR REPLACE FUNCTION queen.partition_last_ids(p_queues text[], p_partitions text[])
RETURNS TABLE (queue text, partition text, last_id uuid) LANGUAGE sql AS $$
    WITH wanted AS (
        SELECT DISTINCT u.q, u.p FROM unnest(p_queues, p_partitions) AS u(q, p)
    ), locked AS (
        SELECT pp.id, w.q, w.p
          FROM wanted w
          JOIN queen.queues qq ON qq.name = w.q
          JOIN queen.partitions pp ON pp.queue_id = qq.id AND pp.name = w.p
         ORDER BY pp.id
           FOR UPDATE OF pp
    )
    SELECT l.q, l.p,
           (SELECT encode(substring(s.frames FROM coalesce(
                       s.frame_ends[s.message_count - 1], 0) + 1 FOR 16), 'hex')::uuid
              FROM queen.segments s
             WHERE s.partition_id = l.id
             ORDER BY s.first_offset DESC
             LIMIT 1)
      FROM locked l;
$$;
