SELECT count(*)
  FROM queen.dead_letters d
  JOIN queen.queues q ON q.id = d.queue_id
 WHERE ($1::text IS NULL OR q.name = $1) AND ($2::text IS NULL OR d.consumer_group = $2)
