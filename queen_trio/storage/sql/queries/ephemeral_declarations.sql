-- Every declared ephemeral queue, for a process that becomes the owner.
SELECT queue, options::text AS options FROM queen.ephemeral_queues ORDER BY queue
