-- GET /api/v1/analytics/system-metrics and /worker-metrics: every worker's samples per bucket
-- (optionally one host or worker).
SELECT w.worker_id, w.hostname, w.pid,
       date_bin(make_interval(mins => :bucket_minutes), w.sampled_at,
                timestamptz '2000-01-01 00:00:00+00') AS bucket,
       avg(w.cpu_user_pct) AS cpu_user, avg(w.cpu_sys_pct) AS cpu_sys,
       avg(w.rss_bytes) AS rss_bytes, avg(w.loop_lag_avg_ms) AS loop_lag_avg,
       max(w.loop_lag_max_ms) AS loop_lag_max, avg(w.pool_size) AS pool_size,
       avg(w.pool_idle) AS pool_idle, avg(w.pool_active) AS pool_active,
       max(w.pool_waiting) AS pool_waiting, max(w.pool_max) AS pool_max,
       avg(w.spool_pending) AS spool_pending, avg(w.long_poll_waiters) AS long_poll_waiters,
       avg(w.queued_work) AS queued_work,
       sum(w.http_requests) AS http_requests, sum(w.http_errors) AS http_errors,
       sum(w.push_requests) AS push_requests, sum(w.push_messages) AS push_messages,
       sum(w.pop_requests) AS pop_requests, sum(w.pop_empty) AS pop_empty,
       sum(w.pop_messages) AS pop_messages, sum(w.ack_requests) AS ack_requests,
       sum(w.ack_messages) AS ack_messages, sum(w.nacked) AS nacked,
       sum(w.ack_failed) AS ack_failed,
       sum(w.dead_lettered) AS dead_lettered, sum(w.transactions) AS transactions,
       sum(w.db_calls) AS db_calls, sum(w.db_errors) AS db_errors
  FROM queen.worker_samples w
 WHERE w.sampled_at >= :range_from AND w.sampled_at <= :range_to
   AND (:hostname::text IS NULL OR w.hostname = :hostname)
   AND (:worker_id::text IS NULL OR w.worker_id = :worker_id)
 GROUP BY w.worker_id, w.hostname, w.pid, 4
 ORDER BY w.worker_id, 4
