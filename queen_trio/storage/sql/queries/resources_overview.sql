-- GET /api/v1/resources/overview: counts from the partitions' offsets and the groups' cursors
-- (queen.partition_totals), lag over every (partition, group), each in one pass. Reads no
-- message.
WITH parts AS (
    SELECT * FROM queen.partition_totals(NULL)
), lag AS (
    SELECT coalesce(avg(l.time_lag), 0) AS time_lag_avg,
           coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY l.time_lag), 0) AS time_lag_median,
           coalesce(min(l.time_lag), 0) AS time_lag_min,
           coalesce(max(l.time_lag), 0) AS time_lag_max,
           coalesce(avg(l.offset_lag), 0) AS offset_lag_avg,
           coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY l.offset_lag), 0)
               AS offset_lag_median,
           coalesce(min(l.offset_lag), 0) AS offset_lag_min,
           coalesce(max(l.offset_lag), 0) AS offset_lag_max
      FROM (SELECT gf.unconsumed::float8 AS offset_lag,
                   CASE WHEN gf.head_at IS NULL THEN 0
                        ELSE greatest(date_part('epoch', now() - gf.head_at), 0) END AS time_lag
              FROM queen.group_figures gf) l
), names AS (
    SELECT count(*) AS queues,
           count(DISTINCT q.namespace) FILTER (WHERE q.namespace <> '') AS namespaces,
           count(DISTINCT q.task) FILTER (WHERE q.task <> '') AS tasks
      FROM queen.queues q
)
SELECT names.*, parts.*, lag.* FROM names, parts, lag
