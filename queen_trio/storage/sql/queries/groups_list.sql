-- GET /api/v1/consumer-groups: one row per (group, queue) subscription, with its figures.
WITH per AS (
    SELECT gf.queue_id, gf.consumer_group, count(*) AS members,
           count(*) FILTER (WHERE gf.unconsumed > 0) AS partitions_with_lag,
           sum(gf.unconsumed) AS total_lag,
           sum(gf.processing) AS processing,
           sum(gf.dead) AS dead_letters,
           max(date_part('epoch', now() - gf.head_at)) AS max_time_lag,
           max(gf.last_consumed_at) AS last_consumed_at,
           sum(gf.consumed_total) AS consumed
      FROM queen.group_figures gf
     GROUP BY gf.queue_id, gf.consumer_group
)
SELECT s.consumer_group, q.name AS queue_name, s.start_at, s.created_at AS subscribed_at,
       s.conflation,
       coalesce(per.members, 0) AS members,
       coalesce(per.partitions_with_lag, 0) AS partitions_with_lag,
       coalesce(per.total_lag, 0) AS total_lag,
       coalesce(per.processing, 0) AS processing,
       coalesce(per.dead_letters, 0) AS dead_letters,
       greatest(coalesce(per.max_time_lag, 0), 0) AS max_time_lag,
       per.last_consumed_at,
       coalesce(per.consumed, 0) AS consumed
  FROM queen.subscriptions s
  JOIN queen.queues q ON q.id = s.queue_id
  LEFT JOIN per ON per.queue_id = s.queue_id AND per.consumer_group = s.consumer_group
 ORDER BY s.consumer_group, q.name
