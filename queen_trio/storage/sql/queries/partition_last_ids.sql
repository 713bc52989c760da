-- A timer fire's destination partitions, locked, with their newest message id
-- (functions/partition_last_ids).
SELECT queue, partition, last_id
  FROM queen.partition_last_ids(:queues::text[], :partitions::text[])
