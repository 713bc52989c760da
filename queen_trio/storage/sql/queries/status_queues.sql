-- GET /api/v1/status: the queues (every one, or those named), with what was consumed from
-- them over the range.
SELECT q.id, q.name, q.namespace, q.task,
       (SELECT count(*) FROM queen.partitions p WHERE p.queue_id = q.id) AS partitions,
       coalesce((SELECT sum(s.acked) FROM queen.queue_samples s
                  WHERE s.queue_name = q.name
                    AND s.sampled_at >= :range_from AND s.sampled_at <= :range_to), 0)
           AS consumed
  FROM queen.queues q
 WHERE :queues::text[] IS NULL OR q.name = ANY (:queues::text[])
 ORDER BY q.name
