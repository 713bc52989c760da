-- DELETE /api/v1/resources/queues/:queue, step 2: the consumer state rows, in partition order.
SELECT 1 FROM queen.consumer_state WHERE partition_id = ANY(:partition_ids::uuid[])
 ORDER BY partition_id FOR UPDATE
