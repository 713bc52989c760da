-- A message's dead letters, one per group, newest first.
SELECT d.consumer_group, d.error_message, d.retry_count, d.failed_at, d.frame,
       d.message_created_at
  FROM queen.dead_letters d
 WHERE d.partition_id = :partition_id AND d.message_offset = :message_offset
 ORDER BY d.failed_at DESC, d.id DESC
