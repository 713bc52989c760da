-- The cluster's figures per queue, as of this minute (the elected stats pass writes them).
INSERT INTO queen.queue_snapshots (
    queue_name, sampled_at, partitions, messages, unconsumed, processing, dead_letters, groups,
    max_offset_lag, max_lag_seconds, avg_lag_seconds)
SELECT q.name, date_trunc('minute', now()), coalesce(pq.partitions, 0),
       coalesce(pq.total, 0), coalesce(pq.unconsumed, 0), coalesce(pq.processing, 0),
       coalesce(pq.dead_letters, 0), coalesce(gq.groups, 0), coalesce(gq.max_offset_lag, 0),
       coalesce(gq.max_lag, 0), coalesce(gq.avg_lag, 0)
  FROM queen.queues q
  LEFT JOIN (SELECT pf.queue_id, count(*) AS partitions, sum(pf.total) AS total,
                    sum(pf.unconsumed) AS unconsumed, sum(pf.processing) AS processing,
                    sum(pf.dead_letters) AS dead_letters
               FROM queen.partition_figures pf GROUP BY pf.queue_id) pq ON pq.queue_id = q.id
  LEFT JOIN (SELECT gf.queue_id, count(DISTINCT gf.consumer_group) AS groups,
                    max(gf.unconsumed) AS max_offset_lag,
                    max(greatest(date_part('epoch', now() - gf.head_at), 0)) AS max_lag,
                    avg(CASE WHEN gf.head_at IS NULL THEN 0
                             ELSE greatest(date_part('epoch', now() - gf.head_at), 0) END)
                        AS avg_lag
               FROM queen.group_figures gf GROUP BY gf.queue_id) gq ON gq.queue_id = q.id
ON CONFLICT (queue_name, sampled_at) DO UPDATE
   SET partitions = EXCLUDED.partitions, messages = EXCLUDED.messages,
       unconsumed = EXCLUDED.unconsumed, processing = EXCLUDED.processing,
       dead_letters = EXCLUDED.dead_letters, groups = EXCLUDED.groups,
       max_offset_lag = EXCLUDED.max_offset_lag, max_lag_seconds = EXCLUDED.max_lag_seconds,
       avg_lag_seconds = EXCLUDED.avg_lag_seconds
