-- Per queue, what every worker pushed, popped and acked in the last minute of samples.
SELECT s.queue_name, sum(s.pushed) AS pushed, sum(s.popped) AS popped, sum(s.acked) AS acked
  FROM queen.queue_samples s
 WHERE s.sampled_at > now() - interval '60 seconds'
 GROUP BY s.queue_name
 ORDER BY s.queue_name
