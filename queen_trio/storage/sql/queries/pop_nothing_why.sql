-- Why a pop found nothing (asked only at debug level): one row per (queue, reason), with how
-- many partitions it holds back and until when. Mirrors pop_claim's conditions.
WITH now_at AS (SELECT clock_timestamp() AS t),
q AS (
    SELECT qq.id, qq.name, qq.delayed_processing, qq.window_buffer
      FROM queen.queues qq
     WHERE (:queue::text IS NULL OR qq.name = :queue)
       AND (:namespace::text IS NULL OR qq.namespace = :namespace)
       AND (:task::text IS NULL OR qq.task = :task)
),
held AS (
    SELECT q.name AS queue,
           CASE WHEN st.lease_expires_at > n.t THEN 'leased'
                WHEN st.not_before > n.t THEN 'retry delay'
                WHEN st.head_at + make_interval(secs => q.delayed_processing) > n.t THEN 'delayed'
                WHEN q.window_buffer > 0
                     AND p.last_commit_at + make_interval(secs => q.window_buffer) > n.t
                     THEN 'window buffer'
                ELSE 'claimed by a concurrent pop' END AS reason,
           CASE WHEN st.lease_expires_at > n.t THEN st.lease_expires_at
                WHEN st.not_before > n.t THEN st.not_before
                WHEN st.head_at + make_interval(secs => q.delayed_processing) > n.t
                     THEN st.head_at + make_interval(secs => q.delayed_processing)
                WHEN q.window_buffer > 0
                     AND p.last_commit_at + make_interval(secs => q.window_buffer) > n.t
                     THEN p.last_commit_at + make_interval(secs => q.window_buffer) END AS until
      FROM q
      JOIN queen.consumer_state st ON st.queue_id = q.id AND st.consumer_group = :consumer_group
      JOIN queen.partitions p ON p.id = st.partition_id
     CROSS JOIN now_at n
     WHERE st.head_at IS NOT NULL AND (:partition::text IS NULL OR p.name = :partition)
),
idle AS (
    SELECT q.name AS queue,
           CASE WHEN :partition::text IS NOT NULL AND NOT EXISTS (
                    SELECT 1 FROM queen.partitions p
                     WHERE p.queue_id = q.id AND p.name = :partition) THEN 'no such partition'
                WHEN s.start_at IS NOT NULL AND EXISTS (
                    SELECT 1 FROM queen.partitions p
                      JOIN queen.segments sg ON sg.partition_id = p.id
                     WHERE p.queue_id = q.id AND sg.created_at < s.start_at
                       AND (:partition::text IS NULL OR p.name = :partition))
                     THEN 'subscription start'
                ELSE 'nothing pending' END AS reason,
           s.start_at AS until
      FROM q
      LEFT JOIN queen.subscriptions s ON s.queue_id = q.id AND s.consumer_group = :consumer_group
     WHERE NOT EXISTS (SELECT 1 FROM held WHERE held.queue = q.name)
)
SELECT queue, reason, count(*)::integer AS partitions, min(until) AS until
  FROM held GROUP BY queue, reason
UNION ALL
SELECT queue, reason, 0, until FROM idle
 ORDER BY 1, 2
