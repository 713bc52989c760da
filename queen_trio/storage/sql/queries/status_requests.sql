-- Requests and messages over the range, every worker (GET /api/v1/status).
SELECT coalesce(sum(w.push_requests), 0) AS push_requests,
       coalesce(sum(w.push_messages), 0) AS push_messages,
       coalesce(sum(w.pop_requests), 0) AS pop_requests,
       coalesce(sum(w.pop_empty), 0) AS pop_empty,
       coalesce(sum(w.pop_messages), 0) AS pop_messages,
       coalesce(sum(w.ack_requests), 0) AS ack_requests,
       coalesce(sum(w.ack_messages), 0) AS ack_messages,
       coalesce(sum(w.nacked), 0) AS nacked,
       coalesce(sum(w.ack_failed), 0) AS ack_failed,
       coalesce(sum(w.dead_lettered), 0) AS dead_lettered,
       coalesce(sum(w.db_errors), 0) AS db_errors
  FROM queen.worker_samples w
 WHERE w.sampled_at >= :range_from AND w.sampled_at <= :range_to
