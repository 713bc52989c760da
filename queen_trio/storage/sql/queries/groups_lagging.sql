-- GET /api/v1/consumer-groups/lagging: (partition, group) pairs whose oldest unconsumed
-- message is older than :min_lag seconds, most lagging first.
SELECT gf.consumer_group, q.name AS queue_name, gf.partition_name, gf.partition_id,
       gf.live_lease_id, gf.unconsumed AS offset_lag,
       greatest(date_part('epoch', now() - gf.head_at), 0) AS time_lag,
       gf.head_at, gf.last_consumed_at
  FROM queen.group_figures gf
  JOIN queen.queues q ON q.id = gf.queue_id
 WHERE gf.head_at IS NOT NULL AND gf.head_at < now() - make_interval(secs => :min_lag)
 ORDER BY gf.head_at, gf.partition_id, gf.consumer_group
 LIMIT :limit
