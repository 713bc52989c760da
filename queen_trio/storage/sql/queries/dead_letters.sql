-- GET /api/v1/dlq: newest failure first; queue and group are optional filters.
SELECT d.message_id, d.transaction_id, d.partition_id, d.partition_name, d.consumer_group,
       d.error_message, d.retry_count, d.frame, d.message_created_at, d.failed_at,
       q.name AS queue_name
  FROM queen.dead_letters d
  JOIN queen.queues q ON q.id = d.queue_id
 WHERE (:queue::text IS NULL OR q.name = :queue) AND (:consumer_group::text IS NULL OR d.consumer_group = :consumer_group)
 ORDER BY d.failed_at DESC, d.id DESC
 LIMIT :limit OFFSET :offset
