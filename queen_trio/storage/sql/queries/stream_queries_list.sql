-- Every streams query with its state's size and last cycle (the CLI, the dashboard).
SELECT q.id, q.name, q.source_queue, q.sink_queue, q.config_hash, q.created_at, q.updated_at,
       (SELECT count(*) FROM queen.stream_state s WHERE s.query_id = q.id) AS state_rows,
       (SELECT coalesce(sum(pg_column_size(s.value) + octet_length(s.key)), 0)
          FROM queen.stream_state s WHERE s.query_id = q.id) AS state_bytes,
       (SELECT count(DISTINCT s.partition_id) FROM queen.stream_state s
         WHERE s.query_id = q.id) AS shards,
       (SELECT max(c.created_at) FROM queen.stream_cycles c WHERE c.query_id = q.id)
           AS last_cycle_at,
       (SELECT array_agg(g.consumer_group ORDER BY g.consumer_group)
          FROM queen.stream_groups g WHERE g.query_id = q.id) AS groups
  FROM queen.stream_queries q
 WHERE :name::text IS NULL OR q.name = :name
 ORDER BY q.name
