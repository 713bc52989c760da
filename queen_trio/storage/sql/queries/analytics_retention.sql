-- GET /api/v1/analytics/retention: what maintenance changed per bucket, by kind.
SELECT date_bin(make_interval(mins => :bucket_minutes), w.sampled_at,
                timestamptz '2000-01-01 00:00:00+00') AS bucket,
       m.key AS kind, sum(m.value::bigint) AS n
  FROM queen.worker_samples w
 CROSS JOIN LATERAL jsonb_each_text(w.maintenance) m
 WHERE w.sampled_at >= :range_from AND w.sampled_at <= :range_to
 GROUP BY 1, 2
 ORDER BY 1, 2
