-- The partitions a message-list filter selects (queue, partition name, namespace, task).
SELECT p.id
  FROM queen.partitions p
  JOIN queen.queues q ON q.id = p.queue_id
 WHERE (:queue::text IS NULL OR q.name = :queue)
   AND (:partition::text IS NULL OR p.name = :partition)
   AND (:namespace::text IS NULL OR q.namespace = :namespace)
   AND (:task::text IS NULL OR q.task = :task)
