-- GET /api/v1/dlq: newest failure first; $1 queue and $2 group are optional filters.
SELECT d.message_id, d.transaction_id, d.partition_id, d.partition_name, d.consumer_group,
       d.error_message, d.retry_count, d.frame, d.message_created_at, d.failed_at,
       q.name AS queue_name
  FROM queen.dead_letters d
  JOIN queen.queues q ON q.id = d.queue_id
 WHERE ($1::text IS NULL OR q.name = $1) AND ($2::text IS NULL OR d.consumer_group = $2)
 ORDER BY d.failed_at DESC, d.id DESC
 LIMIT $3 OFFSET $4
