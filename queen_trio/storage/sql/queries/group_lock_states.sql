-- Lock a group's state rows (of one queue or every queue; of one partition or all) in
-- partition id order, the lock order of every writer that holds several.
SELECT cs.partition_id
  FROM queen.consumer_state cs
 WHERE cs.consumer_group = :consumer_group
   AND (:queue_id::uuid IS NULL OR cs.queue_id = :queue_id)
   AND (:partition_id::uuid IS NULL OR cs.partition_id = :partition_id)
 ORDER BY cs.partition_id
   FOR UPDATE
