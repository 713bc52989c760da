SELECT count(*)
  FROM queen.dead_letters d
  JOIN queen.queues q ON q.id = d.queue_id
 WHERE (:queue::text IS NULL OR q.name = :queue) AND (:consumer_group::text IS NULL OR d.consumer_group = :consumer_group)
