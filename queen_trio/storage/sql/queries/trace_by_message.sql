-- GET /api/v1/traces/:partitionId/:transactionId: the message's events, oldest first.
SELECT e.id, e.event_type, e.data, e.consumer_group, e.worker_id, e.created_at,
       coalesce((SELECT array_agg(n.trace_name ORDER BY n.trace_name) FROM queen.trace_names n
                  WHERE n.event_id = e.id), '{}') AS trace_names
  FROM queen.trace_events e
 WHERE e.partition_id = :partition_id AND e.transaction_id = :transaction_id
 ORDER BY e.created_at, e.id
