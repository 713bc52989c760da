-- One partition's segment headers newest first, before an offset, within the time range
-- (commit times are monotone per partition, so offsets bound the range).
WITH bounds AS (
    SELECT coalesce((SELECT s.first_offset FROM queen.segments s
                      WHERE s.partition_id = :partition_id AND s.created_at >= :range_from
                      ORDER BY s.created_at, s.first_offset LIMIT 1),
                    9223372036854775807) AS low,
           coalesce((SELECT s.first_offset FROM queen.segments s
                      WHERE s.partition_id = :partition_id AND s.created_at <= :range_to
                      ORDER BY s.created_at DESC, s.first_offset DESC LIMIT 1), -1) AS high
)
SELECT s.partition_id, s.first_offset, s.message_count, s.created_at
  FROM queen.segments s, bounds b
 WHERE s.partition_id = :partition_id
   AND s.first_offset >= b.low AND s.first_offset <= b.high
   AND s.first_offset < :before_offset
 ORDER BY s.first_offset DESC
 LIMIT :chunk
