-- Trace events recorded at or after :since, oldest first (a test's report).
SELECT e.id, e.partition_id, e.transaction_id, e.event_type, e.data, e.consumer_group,
       e.worker_id, e.created_at,
       coalesce((SELECT array_agg(n.trace_name ORDER BY n.trace_name) FROM queen.trace_names n
                  WHERE n.event_id = e.id), '{}') AS trace_names
  FROM queen.trace_events e
 WHERE e.created_at >= :since
 ORDER BY e.created_at, e.id
