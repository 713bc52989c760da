-- A cycle's source ack (queen.stream_ack).
SELECT * FROM queen.stream_ack(:partition_id::uuid, :consumer_group, :transaction_id,
                               :lease_id::uuid, :status, :release::boolean, :error)
