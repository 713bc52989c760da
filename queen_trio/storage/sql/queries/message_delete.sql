-- DELETE /api/v1/messages/:partitionId/:transactionId (queen.delete_message).
SELECT * FROM queen.delete_message(:partition_id, :transaction_id)
