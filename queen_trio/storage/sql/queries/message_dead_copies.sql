-- The dead letters of one message (by partition and transaction id), newest per group, with
-- the queue they belong to and whether that group still has a position on the partition.
SELECT DISTINCT ON (d.consumer_group) d.consumer_group, d.frame, q.name AS queue_name,
       EXISTS (SELECT 1 FROM queen.consumer_state cs
                WHERE cs.partition_id = d.partition_id
                  AND cs.consumer_group = d.consumer_group) AS has_position
  FROM queen.dead_letters d
  JOIN queen.queues q ON q.id = d.queue_id
 WHERE d.partition_id = :partition_id AND d.transaction_id = :transaction_id
 ORDER BY d.consumer_group, d.failed_at DESC, d.id DESC
