-- Every partition of a queue with its figures, by name.
SELECT pf.* FROM queen.partition_figures pf WHERE pf.queue_id = :queue_id ORDER BY pf.name
