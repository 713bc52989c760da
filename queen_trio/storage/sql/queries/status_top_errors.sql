-- The commonest dead-letter errors of the range.
SELECT coalesce(d.error_message, '') AS error, count(*) AS n
  FROM queen.dead_letters d
  JOIN queen.queues q ON q.id = d.queue_id
 WHERE d.failed_at >= :range_from AND d.failed_at <= :range_to
   AND (:queues::text[] IS NULL OR q.name = ANY (:queues::text[]))
 GROUP BY 1
 ORDER BY 2 DESC, 1
 LIMIT 10
