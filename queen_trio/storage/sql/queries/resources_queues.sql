-- A page of queues, newest first, each with its figures (queen.partition_figures); filters
-- are optional. The page is chosen first; the figures of its queues' partitions come in one
-- pass. Its generic plan took 0.7 to 1.2 s with 1,000 queues, against 12 ms planned for the
-- values (bench/dashboard_load.py):
-- plan: for its values
WITH page AS (
    SELECT qq.id, qq.name, qq.namespace, qq.task, qq.priority, qq.created_at
      FROM queen.queues qq
     WHERE (:namespace::text IS NULL OR qq.namespace = :namespace)
       AND (:task::text IS NULL OR qq.task = :task)
       AND (:search::text IS NULL OR strpos(lower(qq.name), lower(:search)) > 0)
     ORDER BY qq.created_at DESC, qq.name
     LIMIT :limit OFFSET :offset
), agg AS (
    SELECT pf.queue_id, count(*) AS partitions,
           sum(pf.total) AS total, sum(pf.pending) AS pending,
           sum(pf.processing) AS processing, sum(pf.completed) AS completed,
           sum(pf.retrying) AS failed, sum(pf.dead_letters) AS dead_letters,
           max(pf.last_commit_at) AS last_commit_at
      FROM queen.partition_figures pf
     WHERE pf.queue_id IN (SELECT id FROM page)
     GROUP BY pf.queue_id
)
SELECT q.id, q.name, q.namespace, q.task, q.priority, q.created_at,
       coalesce(agg.partitions, 0) AS partitions, coalesce(agg.total, 0) AS total,
       coalesce(agg.pending, 0) AS pending, coalesce(agg.processing, 0) AS processing,
       coalesce(agg.completed, 0) AS completed, coalesce(agg.failed, 0) AS failed,
       coalesce(agg.dead_letters, 0) AS dead_letters, agg.last_commit_at
  FROM page q
  LEFT JOIN agg ON agg.queue_id = q.id
 ORDER BY q.created_at DESC, q.name
