INSERT INTO queen.worker_samples (
    worker_id, sampled_at, hostname, pid, started_at, interval_ms,
    http_requests, http_errors, push_requests, push_messages, pop_requests, pop_empty,
    pop_messages, ack_requests, ack_messages, nacked, ack_failed, dead_lettered, transactions,
    db_calls, db_errors, loop_lag_avg_ms, loop_lag_max_ms, cpu_user_pct, cpu_sys_pct,
    rss_bytes, pool_max, pool_size, pool_idle, pool_active, pool_waiting, spool_pending,
    spool_failed, long_poll_waiters, queued_work, maintenance)
VALUES (
    :worker_id, :sampled_at, :hostname, :pid, :started_at, :interval_ms,
    :http_requests, :http_errors, :push_requests, :push_messages, :pop_requests, :pop_empty,
    :pop_messages, :ack_requests, :ack_messages, :nacked, :ack_failed, :dead_lettered, :transactions,
    :db_calls, :db_errors, :loop_lag_avg_ms, :loop_lag_max_ms, :cpu_user_pct, :cpu_sys_pct,
    :rss_bytes, :pool_max, :pool_size, :pool_idle, :pool_active, :pool_waiting, :spool_pending,
    :spool_failed, :long_poll_waiters, :queued_work, :maintenance::jsonb)
ON CONFLICT (worker_id, sampled_at) DO NOTHING
