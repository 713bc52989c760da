-- GET /api/v1/traces/by-name/:name: events carrying the name, oldest first, with their
-- message's queue, partition and (still stored) frame.
SELECT e.id, e.transaction_id, e.partition_id, e.event_type, e.data, e.consumer_group,
       e.worker_id, e.created_at, q.name AS queue_name, p.name AS partition_name,
       queen.message_frame(e.partition_id, e.message_offset) AS frame,
       (SELECT array_agg(n2.trace_name ORDER BY n2.trace_name) FROM queen.trace_names n2
         WHERE n2.event_id = e.id) AS trace_names,
       count(*) OVER () AS total
  FROM queen.trace_names n
  JOIN queen.trace_events e ON e.id = n.event_id
  JOIN queen.partitions p ON p.id = e.partition_id
  JOIN queen.queues q ON q.id = p.queue_id
 WHERE n.trace_name = :trace_name
 ORDER BY e.created_at, e.id
 LIMIT :limit OFFSET :offset
