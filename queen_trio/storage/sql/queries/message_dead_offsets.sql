-- Dead-lettered offsets (for any group) of partitions within offset ranges.
SELECT DISTINCT d.partition_id, d.message_offset
  FROM unnest(:partition_ids::uuid[], :lows::bigint[], :highs::bigint[]) AS r(pid, low, high)
  JOIN queen.dead_letters d
    ON d.partition_id = r.pid AND d.message_offset >= r.low AND d.message_offset < r.high
