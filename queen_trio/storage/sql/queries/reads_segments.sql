-- Offset reads (reads/fetch.py): up to :limit segments of a partition from the one holding
-- :from_offset upward, in offset order (the primary key's order).
SELECT s.first_offset, s.message_count, s.created_at, s.frames, s.frame_ends
  FROM queen.segments s
 WHERE s.partition_id = :partition_id::uuid
   AND s.first_offset >= coalesce(
         (SELECT s2.first_offset FROM queen.segments s2
           WHERE s2.partition_id = :partition_id::uuid AND s2.first_offset <= :from_offset::bigint
           ORDER BY s2.first_offset DESC LIMIT 1), :from_offset::bigint)
 ORDER BY s.first_offset
 LIMIT :limit::integer
