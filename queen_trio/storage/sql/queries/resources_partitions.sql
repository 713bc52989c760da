-- GET /api/v1/resources/partitions: a page of partitions (of one queue, or all), by queue then
-- partition name. The page is chosen first; only its partitions' figures are computed.
SELECT pf.partition_id, pf.name, page.queue_name, pf.created_at, pf.total, pf.unconsumed,
       greatest(pf.last_commit_at, pf.last_consumed_at) AS last_activity
  FROM (SELECT p.id, q.name AS queue_name, p.name
          FROM queen.partitions p
          JOIN queen.queues q ON q.id = p.queue_id
         WHERE :queue_id::uuid IS NULL OR p.queue_id = :queue_id
         ORDER BY q.name, p.name
         LIMIT :limit OFFSET :offset) page
 CROSS JOIN LATERAL (SELECT * FROM queen.partition_figures f WHERE f.partition_id = page.id) pf
 ORDER BY page.queue_name, page.name
