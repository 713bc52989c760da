SELECT p.id, p.name FROM queen.partitions p WHERE p.queue_id = :queue_id AND p.name = :partition
