-- Segment headers newest first across partitions (all, or those named), before a position:
-- an index-only walk of segments_time that reads no frame.
SELECT s.partition_id, s.first_offset, s.message_count, s.created_at
  FROM queen.segments s
 WHERE s.created_at >= :range_from AND s.created_at <= :range_to
   AND (:partition_ids::uuid[] IS NULL OR s.partition_id = ANY (:partition_ids::uuid[]))
   AND (s.created_at, s.partition_id, s.first_offset)
       < (:before_at::timestamptz, :before_partition::uuid, :before_offset::bigint)
 ORDER BY s.created_at DESC, s.partition_id DESC, s.first_offset DESC
 LIMIT :chunk
