-- GET /api/v1/status/analytics: messages pushed and consumed per bucket (every worker, or
-- the named queues).
SELECT t.bucket, t.pushed, t.acked
  FROM queen.traffic_buckets(:bucket_minutes, :range_from, :range_to, :queues::text[]) t
 ORDER BY 1
