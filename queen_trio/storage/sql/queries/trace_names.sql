-- GET /api/v1/traces/names: most recently seen first.
SELECT n.trace_name, count(*) AS trace_count,
       count(DISTINCT (e.partition_id, e.message_offset)) AS message_count,
       max(n.created_at) AS last_seen, count(*) OVER () AS total
  FROM queen.trace_names n JOIN queen.trace_events e ON e.id = n.event_id
 GROUP BY n.trace_name
 ORDER BY max(n.created_at) DESC, n.trace_name
 LIMIT :limit OFFSET :offset
