-- DELETE /api/v1/resources/queues/:queue, step 3: the transaction index has no foreign key.
DELETE FROM queen.transaction_index WHERE partition_id = ANY(:partition_ids::uuid[])
