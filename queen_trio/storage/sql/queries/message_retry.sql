-- POST /api/v1/messages/:partitionId/:transactionId/retry (queen.retry_dead_letter).
SELECT * FROM queen.retry_dead_letter(:partition_id, :transaction_id, :consumer_groups)
