-- status=dead_letter: dead-lettered messages (any group) newest first, one row per message,
-- with the frame the dead letter keeps. Dead letters have no foreign key to their partition:
-- those of a partition the reclaimer deleted are left out.
SELECT DISTINCT ON (d.message_created_at, d.partition_id, d.message_offset)
       d.partition_id, d.message_offset, d.message_created_at, d.frame
  FROM queen.dead_letters d
  JOIN queen.partitions p ON p.id = d.partition_id
 WHERE d.message_created_at >= :range_from AND d.message_created_at <= :range_to
   AND (:partition_ids::uuid[] IS NULL OR d.partition_id = ANY (:partition_ids::uuid[]))
 ORDER BY d.message_created_at DESC, d.partition_id DESC, d.message_offset DESC
 LIMIT :limit OFFSET :offset
