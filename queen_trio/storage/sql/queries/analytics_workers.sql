-- GET /api/v1/analytics/system-metrics and /worker-metrics: every worker's samples per bucket
-- (optionally one host or worker). {figures}: each figure's column folded over the bucket
-- (avg, max or sum), from the one list of figures in ops/analytics.py.
SELECT w.worker_id, w.hostname, w.pid,
       date_bin(make_interval(mins => :bucket_minutes), w.sampled_at,
                timestamptz '2000-01-01 00:00:00+00') AS bucket,
       {figures}
  FROM queen.worker_samples w
 WHERE w.sampled_at >= :range_from AND w.sampled_at <= :range_to
   AND (:hostname::text IS NULL OR w.hostname = :hostname)
   AND (:worker_id::text IS NULL OR w.worker_id = :worker_id)
 GROUP BY w.worker_id, w.hostname, w.pid, 4
 ORDER BY w.worker_id, 4
