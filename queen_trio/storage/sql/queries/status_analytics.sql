-- GET /api/v1/status/analytics: messages pushed and consumed per bucket (every worker, or
-- the named queues).
SELECT date_bin(make_interval(mins => :bucket_minutes), w.sampled_at,
                timestamptz '2000-01-01 00:00:00+00') AS bucket,
       sum(w.push_messages) AS pushed, sum(w.ack_messages) AS acked
  FROM queen.worker_samples w
 WHERE :queues::text[] IS NULL AND w.sampled_at >= :range_from AND w.sampled_at <= :range_to
 GROUP BY 1
UNION ALL
SELECT date_bin(make_interval(mins => :bucket_minutes), s.sampled_at,
                timestamptz '2000-01-01 00:00:00+00'),
       sum(s.pushed), sum(s.acked)
  FROM queen.queue_samples s
 WHERE s.queue_name = ANY (:queues::text[])
   AND s.sampled_at >= :range_from AND s.sampled_at <= :range_to
 GROUP BY 1
 ORDER BY 1
