-- Pending timers per queue, for the dashboard and the metrics: how many, how many held by a
-- fire or in backoff, and the next due time.
SELECT t.queue, count(*)::bigint AS pending,
       count(*) FILTER (WHERE t.claimed_until > clock_timestamp())::bigint AS held,
       min(t.deliver_at) AS next_due
  FROM queen.timers t
 GROUP BY t.queue
 ORDER BY t.queue
