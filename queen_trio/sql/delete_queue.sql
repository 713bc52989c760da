-- DELETE /api/v1/resources/queues/:queue, in one transaction (queen_trio/queues.py). Locks are
-- taken in the order every writer uses: partition rows by id, then consumer state rows, then
-- the queue row (by the DELETE), so a concurrent push, pop or ack can never deadlock it.
SELECT p.id FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = $1 ORDER BY p.id FOR UPDATE OF p
