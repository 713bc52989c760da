-- A query's source groups' lag: messages after the cursor, summed over the source queue's
-- partitions.
SELECT coalesce(sum(p.next_offset - cs.cursor_offset), 0) AS lag
  FROM queen.stream_groups g
  JOIN queen.queues q ON q.name = g.queue_name
  JOIN queen.consumer_state cs ON cs.queue_id = q.id AND cs.consumer_group = g.consumer_group
  JOIN queen.partitions p ON p.id = cs.partition_id
 WHERE g.query_id = :query_id::uuid
