-- The trace names recorded at or after :since, first recorded first (a test's report).
SELECT trace_name
  FROM queen.trace_names
 WHERE created_at >= :since
 GROUP BY trace_name
 ORDER BY min(created_at), trace_name
