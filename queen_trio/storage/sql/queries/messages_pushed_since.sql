-- Messages committed at or after :since, oldest first, with their queue, partition and (still
-- stored) frame; at most :limit of them, and how many there are (a test's report).
SELECT t.partition_id, t.transaction_id, t.message_offset, t.created_at,
       q.name AS queue_name, p.name AS partition_name,
       (SELECT queen.frames_between(s.frames, s.frame_ends,
                                    (t.message_offset - s.first_offset)::integer, 1)
          FROM queen.segments s
         WHERE s.partition_id = t.partition_id AND s.first_offset <= t.message_offset
           AND s.first_offset + s.message_count > t.message_offset
         ORDER BY s.first_offset DESC LIMIT 1) AS frame,
       count(*) OVER () AS total
  FROM queen.transaction_index t
  JOIN queen.partitions p ON p.id = t.partition_id
  JOIN queen.queues q ON q.id = p.queue_id
 WHERE t.created_at >= :since
 ORDER BY t.created_at, q.name, p.name, t.message_offset
 LIMIT :limit
