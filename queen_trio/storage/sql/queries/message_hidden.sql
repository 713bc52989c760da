-- Deleted offsets of the given partitions within offset ranges (the message list skips them).
SELECT h.partition_id, h.message_offset
  FROM unnest(:partition_ids::uuid[], :lows::bigint[], :highs::bigint[]) AS r(pid, low, high)
  JOIN queen.hidden_messages h
    ON h.partition_id = r.pid AND h.message_offset >= r.low AND h.message_offset < r.high
