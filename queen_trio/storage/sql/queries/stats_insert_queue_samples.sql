INSERT INTO queen.queue_samples (
    queue_name, sampled_at, worker_id, hostname, pid, interval_ms, pushed, pop_requests,
    pop_empty, popped, acked, nacked, ack_failed, dead_lettered, long_poll_waiters)
SELECT u.queue_name, :sampled_at, :worker_id, :hostname, :pid, :interval_ms, u.pushed,
       u.pop_requests, u.pop_empty, u.popped, u.acked, u.nacked, u.ack_failed, u.dead_lettered,
       u.waiters
  FROM unnest(:queue_names::text[], :pushed::bigint[], :pop_requests::bigint[],
              :pop_empty::bigint[], :popped::bigint[], :acked::bigint[], :nacked::bigint[],
              :ack_failed::bigint[], :dead_lettered::bigint[], :waiters::integer[])
       AS u(queue_name, pushed, pop_requests, pop_empty, popped, acked, nacked, ack_failed,
            dead_lettered, waiters)
ON CONFLICT (queue_name, sampled_at, worker_id) DO NOTHING
