-- GET /api/v1/resources/overview: counts from the partitions' offsets and the groups' cursors
-- (queen.partition_figures), lag over every (partition, group). Reads no message.
WITH parts AS (
    SELECT count(*) AS partitions,
           coalesce(sum(pf.total), 0) AS total,
           coalesce(sum(pf.pending), 0) AS pending,
           coalesce(sum(pf.processing), 0) AS processing,
           coalesce(sum(pf.completed), 0) AS completed,
           coalesce(sum(pf.retrying), 0) AS failed,
           coalesce(sum(pf.dead_letters), 0) AS dead_letters
      FROM queen.partition_figures pf
), lag AS (
    SELECT greatest(p.next_offset - cs.cursor_offset, 0) AS offset_lag,
           CASE WHEN cs.head_at IS NULL THEN 0
                ELSE greatest(extract(epoch FROM now() - cs.head_at), 0) END AS time_lag
      FROM queen.consumer_state cs JOIN queen.partitions p ON p.id = cs.partition_id
)
SELECT (SELECT count(*) FROM queen.queues) AS queues,
       (SELECT count(DISTINCT q.namespace) FROM queen.queues q WHERE q.namespace <> '') AS namespaces,
       (SELECT count(DISTINCT q.task) FROM queen.queues q WHERE q.task <> '') AS tasks,
       parts.*,
       (SELECT coalesce(avg(l.time_lag), 0) FROM lag l) AS time_lag_avg,
       (SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY l.time_lag), 0) FROM lag l) AS time_lag_median,
       (SELECT coalesce(min(l.time_lag), 0) FROM lag l) AS time_lag_min,
       (SELECT coalesce(max(l.time_lag), 0) FROM lag l) AS time_lag_max,
       (SELECT coalesce(avg(l.offset_lag), 0) FROM lag l) AS offset_lag_avg,
       (SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY l.offset_lag), 0) FROM lag l) AS offset_lag_median,
       (SELECT coalesce(min(l.offset_lag), 0) FROM lag l) AS offset_lag_min,
       (SELECT coalesce(max(l.offset_lag), 0) FROM lag l) AS offset_lag_max
  FROM parts
