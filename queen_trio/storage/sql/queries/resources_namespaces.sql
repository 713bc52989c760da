-- GET /api/v1/resources/namespaces (by = 'namespace') and /tasks (by = 'task').
SELECT CASE WHEN :by::text = 'task' THEN q.task ELSE q.namespace END AS key,
       count(DISTINCT q.id) AS queues, count(pf.partition_id) AS partitions,
       coalesce(sum(pf.total), 0) AS total,
       coalesce(sum(pf.pending), 0) AS pending
  FROM queen.queues q
  LEFT JOIN queen.partition_figures pf ON pf.queue_id = q.id
 WHERE CASE WHEN :by::text = 'task' THEN q.task ELSE q.namespace END <> ''
 GROUP BY 1
 ORDER BY 1
