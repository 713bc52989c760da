-- The names of the queues a status filter selects.
SELECT q.name FROM queen.queues q
 WHERE (:queue::text IS NULL OR q.name = :queue)
   AND (:namespace::text IS NULL OR q.namespace = :namespace)
   AND (:task::text IS NULL OR q.task = :task)
 ORDER BY q.name
