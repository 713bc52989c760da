-- The workers that sampled in the range: their latest figures and the range's aggregates.
SELECT DISTINCT ON (w.worker_id)
       w.worker_id, w.hostname, w.pid, w.sampled_at, w.pool_max - w.pool_active AS free_slots,
       w.pool_size, w.queued_work,
       avg(w.loop_lag_avg_ms) OVER per AS loop_lag_avg,
       max(w.loop_lag_max_ms) OVER per AS loop_lag_max,
       sum(w.ack_messages) OVER per AS processed
  FROM queen.worker_samples w
 WHERE w.sampled_at >= :range_from AND w.sampled_at <= :range_to
WINDOW per AS (PARTITION BY w.worker_id)
 ORDER BY w.worker_id, w.sampled_at DESC
