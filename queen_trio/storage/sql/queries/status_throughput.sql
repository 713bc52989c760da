-- GET /api/v1/status: per bucket of the range, traffic (every worker's samples, or the named
-- queues' when :queues is not NULL), system figures, and the cluster's lag snapshots.
WITH traffic AS (
    SELECT t.bucket, t.pushed AS ingested, t.acked AS processed, t.popped, t.ack_failed,
           t.dead_lettered
      FROM queen.traffic_buckets(:bucket_minutes, :range_from, :range_to, :queues::text[]) t
), system AS (
    SELECT date_bin(make_interval(mins => :bucket_minutes), w.sampled_at,
                    timestamptz '2000-01-01 00:00:00+00') AS bucket,
           avg(w.loop_lag_avg_ms) AS loop_lag_avg, max(w.loop_lag_max_ms) AS loop_lag_max,
           min(w.pool_max - w.pool_active) AS min_free_slots, sum(w.db_errors) AS db_errors,
           avg(w.cpu_user_pct) AS cpu_user, avg(w.cpu_sys_pct) AS cpu_sys,
           avg(w.rss_bytes) AS rss_bytes, avg(w.pool_active) AS pool_active,
           avg(w.pool_idle) AS pool_idle, avg(w.pool_size) AS pool_size
      FROM queen.worker_samples w
     WHERE w.sampled_at >= :range_from AND w.sampled_at <= :range_to
     GROUP BY 1
), lag AS (
    SELECT date_bin(make_interval(mins => :bucket_minutes), n.sampled_at,
                    timestamptz '2000-01-01 00:00:00+00') AS bucket,
           avg(n.avg_lag_seconds) * 1000 AS avg_lag_ms, max(n.max_lag_seconds) * 1000 AS max_lag_ms
      FROM queen.queue_snapshots n
     WHERE (:queues::text[] IS NULL OR n.queue_name = ANY (:queues::text[]))
       AND n.sampled_at >= :range_from AND n.sampled_at <= :range_to
     GROUP BY 1
)
SELECT b.bucket, t.ingested, t.processed, t.popped, t.ack_failed, t.dead_lettered,
       s.loop_lag_avg, s.loop_lag_max, s.min_free_slots, s.db_errors, s.cpu_user, s.cpu_sys,
       s.rss_bytes, s.pool_active, s.pool_idle, s.pool_size, l.avg_lag_ms, l.max_lag_ms
  FROM (SELECT bucket FROM traffic UNION SELECT bucket FROM system UNION SELECT bucket FROM lag) b
  LEFT JOIN traffic t ON t.bucket = b.bucket
  LEFT JOIN system s ON s.bucket = b.bucket
  LEFT JOIN lag l ON l.bucket = b.bucket
 ORDER BY b.bucket
