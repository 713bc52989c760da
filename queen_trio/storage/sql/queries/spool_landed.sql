-- Spool replay: which of these messages a commit already stored (one whose reply was lost),
-- found by transaction id and confirmed by the message id at the start of its frame, so it
-- holds whatever the queue's dedup window.
SELECT u.message_id
  FROM unnest(:transaction_ids::text[], :message_ids::uuid[]) AS u(transaction_id, message_id)
  JOIN queen.queues q ON q.name = :queue
  JOIN queen.partitions p ON p.queue_id = q.id AND p.name = :partition
  JOIN queen.transaction_index t
    ON t.partition_id = p.id AND t.transaction_id = u.transaction_id
  JOIN LATERAL (
        SELECT s.first_offset, s.message_count, s.frames, s.frame_ends
          FROM queen.segments s
         WHERE s.partition_id = p.id AND s.first_offset <= t.message_offset
         ORDER BY s.first_offset DESC LIMIT 1) sg ON true
 WHERE t.message_offset < sg.first_offset + sg.message_count
   AND substring(sg.frames
                   FROM coalesce(sg.frame_ends[(t.message_offset - sg.first_offset)::integer], 0) + 1
                   FOR 16) = uuid_send(u.message_id)
