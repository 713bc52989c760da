-- Every queue's figures for /metrics/prometheus (queen.partition_figures, summed).
SELECT q.name, count(pf.partition_id) AS partitions,
       coalesce(sum(pf.total), 0) AS total,
       coalesce(sum(pf.unconsumed), 0) AS unconsumed,
       coalesce(sum(pf.processing), 0) AS processing,
       coalesce(sum(pf.dead_letters), 0) AS dead_letters
  FROM queen.queues q
  LEFT JOIN queen.partition_figures pf ON pf.queue_id = q.id
 GROUP BY q.name
 ORDER BY q.name
