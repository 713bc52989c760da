-- GET /api/v1/consumer-groups/:group: the group's state on every partition, by queue.
SELECT q.name AS queue_name, gf.partition_name, gf.partition_id, gf.live_lease_id,
       gf.live_lease_expires_at, gf.last_consumed_at, gf.consumed_total, gf.unconsumed,
       gf.processing, gf.dead, gf.retry_count, gf.head_at,
       greatest(coalesce(date_part('epoch', now() - gf.head_at), 0), 0) AS time_lag
  FROM queen.group_figures gf
  JOIN queen.queues q ON q.id = gf.queue_id
 WHERE gf.consumer_group = :consumer_group
 ORDER BY q.name, gf.partition_name
