-- One message by (partition, transaction id): its offset, its segment's frame (NULL once
-- retention removed it) and commit time, its queue's options.
SELECT p.id AS partition_id, p.name AS partition_name, q.id AS queue_id, q.name AS queue_name,
       q.namespace, q.task, q.priority, q.lease_time, q.retry_limit, q.retry_delay, q.ttl,
       m.message_offset, seg.created_at,
       CASE WHEN seg.first_offset IS NOT NULL
            THEN queen.frames_between(seg.frames, seg.frame_ends,
                                      (m.message_offset - seg.first_offset)::integer, 1)
       END AS frame
  FROM queen.partitions p
  JOIN queen.queues q ON q.id = p.queue_id
 CROSS JOIN LATERAL (
        SELECT queen.message_offset(p.id, :transaction_id, '__QUEUE_MODE__') AS message_offset) m
  LEFT JOIN LATERAL (
        SELECT s.first_offset, s.created_at, s.frames, s.frame_ends FROM queen.segments s
         WHERE s.partition_id = p.id AND s.first_offset <= m.message_offset
           AND s.first_offset + s.message_count > m.message_offset
         ORDER BY s.first_offset DESC LIMIT 1) seg ON true
 WHERE p.id = :partition_id AND m.message_offset IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM queen.hidden_messages h
                    WHERE h.partition_id = p.id AND h.message_offset = m.message_offset)
