-- A page of queues, newest first, each with its figures (queen.partition_figures); filters
-- are optional. The page is chosen before any partition is looked at.
SELECT q.id, q.name, q.namespace, q.task, q.priority, q.created_at,
       agg.partitions, agg.total, agg.pending, agg.processing, agg.completed, agg.failed,
       agg.dead_letters, agg.last_commit_at
  FROM (SELECT qq.* FROM queen.queues qq
         WHERE (:namespace::text IS NULL OR qq.namespace = :namespace)
           AND (:task::text IS NULL OR qq.task = :task)
           AND (:search::text IS NULL OR strpos(lower(qq.name), lower(:search)) > 0)
         ORDER BY qq.created_at DESC, qq.name
         LIMIT :limit OFFSET :offset) q
 CROSS JOIN LATERAL (
        SELECT count(pf.partition_id) AS partitions,
               coalesce(sum(pf.total), 0) AS total,
               coalesce(sum(pf.pending), 0) AS pending,
               coalesce(sum(pf.processing), 0) AS processing,
               coalesce(sum(pf.completed), 0) AS completed,
               coalesce(sum(pf.retrying), 0) AS failed,
               coalesce(sum(pf.dead_letters), 0) AS dead_letters,
               max(pf.last_commit_at) AS last_commit_at
          FROM queen.partition_figures pf WHERE pf.queue_id = q.id) agg
 ORDER BY q.created_at DESC, q.name
