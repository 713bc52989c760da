-- GET /api/v1/analytics/queue-lag: the cluster's per-queue snapshots per bucket.
SELECT n.queue_name,
       date_bin(make_interval(mins => :bucket_minutes), n.sampled_at,
                timestamptz '2000-01-01 00:00:00+00') AS bucket,
       avg(n.unconsumed) AS unconsumed, avg(n.processing) AS processing,
       max(n.max_lag_seconds) AS max_lag, avg(n.avg_lag_seconds) AS avg_lag,
       max(n.max_offset_lag) AS max_offset_lag, avg(n.dead_letters) AS dead_letters,
       avg(n.messages) AS messages
  FROM queen.queue_snapshots n
 WHERE n.sampled_at >= :range_from AND n.sampled_at <= :range_to
   AND (:queues::text[] IS NULL OR n.queue_name = ANY (:queues::text[]))
 GROUP BY n.queue_name, 2
 ORDER BY n.queue_name, 2
