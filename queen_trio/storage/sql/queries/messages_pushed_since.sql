-- Messages committed at or after :since, oldest first, with their queue, partition and (still
-- stored) frame; at most :limit of them, and how many there are (a test's report).
SELECT t.partition_id, t.transaction_id, t.message_offset, t.created_at,
       q.name AS queue_name, p.name AS partition_name,
       queen.message_frame(t.partition_id, t.message_offset) AS frame,
       count(*) OVER () AS total
  FROM queen.transaction_index t
  JOIN queen.partitions p ON p.id = t.partition_id
  JOIN queen.queues q ON q.id = p.queue_id
 WHERE t.created_at >= :since
 ORDER BY t.created_at, q.name, p.name, t.message_offset
 LIMIT :limit
