-- Offset reads (reads/fetch.py): per (queue, partition) asked, whether the queue exists, the
-- partition's id, its high watermark (the next offset it will assign) and the oldest offset
-- retention kept (NULL when it keeps none).
SELECT u.ord::integer AS ord, q.id IS NOT NULL AS queue_known, p.id AS partition_id,
       p.next_offset,
       (SELECT s.first_offset FROM queen.segments s
         WHERE s.partition_id = p.id ORDER BY s.first_offset LIMIT 1) AS log_start
  FROM unnest(:queues::text[], :partitions::text[]) WITH ORDINALITY AS u(qname, pname, ord)
  LEFT JOIN queen.queues q ON q.name = u.qname
  LEFT JOIN queen.partitions p ON p.queue_id = q.id AND p.name = u.pname
 ORDER BY u.ord
