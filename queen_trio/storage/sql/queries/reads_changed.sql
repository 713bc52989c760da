-- plan: for its values
-- partitions/changed (reads/changed.py): a queue's partitions, one page. Without :since,
-- every partition in creation order (created_at, id); with it, those written at or after it,
-- in (last_write_at, id) order. :after_at/:after_id are the cursor's position (exclusive).
SELECT p.id, p.name, p.next_offset, p.created_at, p.last_write_at,
       (SELECT s.first_offset FROM queen.segments s
         WHERE s.partition_id = p.id ORDER BY s.first_offset LIMIT 1) AS log_start
  FROM queen.partitions p
 WHERE p.queue_id = :queue_id::uuid
   AND (:since::timestamptz IS NULL OR p.last_write_at >= :since::timestamptz)
   AND (:after_at::timestamptz IS NULL
        OR (CASE WHEN :since::timestamptz IS NULL THEN p.created_at ELSE p.last_write_at END,
            p.id) > (:after_at::timestamptz, :after_id::uuid))
 ORDER BY CASE WHEN :since::timestamptz IS NULL THEN p.created_at ELSE p.last_write_at END, p.id
 LIMIT :limit::integer + 1
