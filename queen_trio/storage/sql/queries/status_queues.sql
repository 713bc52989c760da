-- GET /api/v1/status: the queues (every one, or those named), with what was consumed from
-- them over the range. One pass over the range's samples and one over the partitions (not a
-- lookup per queue: a broker with a thousand queues answers in milliseconds).
WITH consumed AS (
    SELECT s.queue_name, sum(s.acked) AS consumed
      FROM queen.queue_samples s
     WHERE s.sampled_at >= :range_from AND s.sampled_at <= :range_to
       AND (:queues::text[] IS NULL OR s.queue_name = ANY (:queues::text[]))
     GROUP BY s.queue_name
), parts AS (
    SELECT p.queue_id, count(*) AS partitions FROM queen.partitions p GROUP BY p.queue_id
)
SELECT q.id, q.name, q.namespace, q.task, coalesce(pa.partitions, 0) AS partitions,
       coalesce(c.consumed, 0) AS consumed
  FROM queen.queues q
  LEFT JOIN parts pa ON pa.queue_id = q.id
  LEFT JOIN consumed c ON c.queue_name = q.name
 WHERE :queues::text[] IS NULL OR q.name = ANY (:queues::text[])
 ORDER BY q.name
