-- Messages per time bucket of a range: every worker's samples, or the named queues' samples
-- when p_queues is not NULL. GET /api/v1/status and /api/v1/status/analytics both read it.
CREATE OR REPLACE FUNCTION queen.traffic_buckets(
    p_bucket_minutes integer,
    p_from           timestamptz,
    p_to             timestamptz,
    p_queues         text[]
) RETURNS TABLE (
    bucket        timestamptz,
    pushed        numeric,
    acked         numeric,
    popped        numeric,
    ack_failed    numeric,
    dead_lettered numeric
) LANGUAGE sql STABLE AS $$
    SELECT date_bin(make_interval(mins => p_bucket_minutes), w.sampled_at,
                    timestamptz '2000-01-01 00:00:00+00'),
           sum(w.push_messages), sum(w.ack_messages), sum(w.pop_messages),
           sum(w.ack_failed), sum(w.dead_lettered)
      FROM queen.worker_samples w
     WHERE p_queues IS NULL AND w.sampled_at >= p_from AND w.sampled_at <= p_to
     GROUP BY 1
    UNION ALL
    SELECT date_bin(make_interval(mins => p_bucket_minutes), s.sampled_at,
                    timestamptz '2000-01-01 00:00:00+00'),
           sum(s.pushed), sum(s.acked), sum(s.popped), sum(s.ack_failed), sum(s.dead_lettered)
      FROM queen.queue_samples s
     WHERE s.queue_name = ANY (p_queues) AND s.sampled_at >= p_from AND s.sampled_at <= p_to
     GROUP BY 1
$$;
