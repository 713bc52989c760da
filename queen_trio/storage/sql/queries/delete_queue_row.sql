-- DELETE /api/v1/resources/queues/:queue, step 4: everything else cascades from the queue row.
DELETE FROM queen.queues WHERE name = :queue
