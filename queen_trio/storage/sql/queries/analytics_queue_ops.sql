-- GET /api/v1/analytics/queue-ops and /queue-parked-replicas: every worker's per-queue samples
-- per bucket.
SELECT s.queue_name,
       date_bin(make_interval(mins => :bucket_minutes), s.sampled_at,
                timestamptz '2000-01-01 00:00:00+00') AS bucket,
       sum(s.pushed) AS pushed, sum(s.pop_requests) AS pop_requests,
       sum(s.pop_empty) AS pop_empty, sum(s.popped) AS popped, sum(s.acked) AS acked,
       sum(s.nacked) AS nacked, sum(s.ack_failed) AS ack_failed, sum(s.dead_lettered) AS dead_lettered,
       max(s.long_poll_waiters) AS parked_max,
       sum(s.long_poll_waiters::float8 * s.interval_ms) / (:bucket_minutes * 60000.0) AS parked_avg
  FROM queen.queue_samples s
 WHERE s.sampled_at >= :range_from AND s.sampled_at <= :range_to
   AND (:queues::text[] IS NULL OR s.queue_name = ANY (:queues::text[]))
 GROUP BY s.queue_name, 2
 ORDER BY s.queue_name, 2
