-- What a message listing shows of each partition's queue.
SELECT p.id, p.name, q.id AS queue_id, q.name AS queue_name, q.namespace, q.task, q.priority,
       EXISTS (SELECT 1 FROM queen.dead_letter_counts d WHERE d.partition_id = p.id) AS has_dead
  FROM queen.partitions p
  JOIN queen.queues q ON q.id = p.queue_id
 WHERE p.id = ANY (:partition_ids::uuid[])
