-- DELETE /api/v1/resources/queues/:queue, step 1 of one transaction (queen_trio/queues). Locks
-- are taken in the order every writer uses: partition rows by id, then consumer state rows,
-- then the queue row (by the DELETE), so a concurrent push, pop or ack can never deadlock it.
SELECT p.id FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = :queue ORDER BY p.id FOR UPDATE OF p
