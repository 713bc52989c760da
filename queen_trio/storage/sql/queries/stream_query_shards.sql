-- One query's state shards: per source partition, its rows, bytes, watermark, last update,
-- last cycle, and the lag of the query's source group there.
SELECT s.partition_id, p.name AS partition_name, qq.name AS queue_name,
       count(*) AS state_rows,
       sum(pg_column_size(s.value) + octet_length(s.key)) AS state_bytes,
       max(s.updated_at) AS updated_at,
       (SELECT (w.value ->> 'eventTimeMs')::numeric FROM queen.stream_state w
         WHERE w.query_id = s.query_id AND w.partition_id = s.partition_id
           AND w.key = '__wm__') AS watermark_ms,
       (SELECT max(c.created_at) FROM queen.stream_cycles c
         WHERE c.query_id = s.query_id AND c.partition_id = s.partition_id) AS last_cycle_at,
       (SELECT max(p.next_offset - cs.cursor_offset) FROM queen.consumer_state cs
          JOIN queen.stream_groups g ON g.consumer_group = cs.consumer_group
                                    AND g.query_id = s.query_id
         WHERE cs.partition_id = s.partition_id) AS lag
  FROM queen.stream_state s
  JOIN queen.partitions p ON p.id = s.partition_id
  JOIN queen.queues qq ON qq.id = p.queue_id
 WHERE s.query_id = :query_id::uuid
   AND (:partition::text IS NULL OR p.name = :partition OR s.partition_id::text = :partition)
 GROUP BY s.query_id, s.partition_id, p.name, qq.name, p.next_offset
 ORDER BY qq.name, p.name
