-- POST /api/v1/traces: one event against the message the group addresses (no row: no message).
WITH target AS (SELECT queen.message_offset(:partition_id, :transaction_id, :consumer_group) AS off)
INSERT INTO queen.trace_events (id, partition_id, transaction_id, message_offset,
                                consumer_group, event_type, data, worker_id)
SELECT :event_id, :partition_id, :transaction_id, target.off, :consumer_group, :event_type,
       :data, :worker_id
  FROM target WHERE target.off IS NOT NULL
RETURNING created_at
