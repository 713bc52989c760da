-- Per partition of a queue: what is left to consume, under the slowest group (no group given)
-- or under the named group (its partitions only).
SELECT pf.name, pf.unconsumed AS pending
  FROM queen.partition_figures pf
 WHERE pf.queue_id = :queue_id AND :consumer_group::text IS NULL
UNION ALL
SELECT gf.partition_name, gf.unconsumed
  FROM queen.group_figures gf
 WHERE gf.queue_id = :queue_id AND gf.consumer_group = :consumer_group
 ORDER BY 1
