-- Acks of one request or of several fused ones (functions/ack_batch.sql documents the rules).
SELECT * FROM queen.ack_batch(:consumer_groups, :partition_ids, :transaction_ids, :statuses,
                              :lease_ids, :errors)
