-- DELETE /api/v1/resources/queues/:queue, step 3: everything else cascades from the queue row
-- (segments and transaction index rows through triggers/partitions_removed).
DELETE FROM queen.queues WHERE name = :queue
