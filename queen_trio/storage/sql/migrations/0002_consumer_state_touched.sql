-- When a group first touched a partition: its cursor moved there by consumption (acks,
-- autoAck, dead letters, eviction; a seek is not consumption), or it held a lease there. NULL:
-- the group joined the partition and never touched it (the Default partition of a queue whose
-- pushes all name one). A seek's `partitionsUpdated` and a group delete's `deletedPartitions`
-- count only touched partitions, as the reference does. Kept by the consumer_state triggers
-- (functions/count_consumption, functions/mark_touched).
ALTER TABLE queen.consumer_state ADD COLUMN touched_at timestamptz;

-- What the rows tell of the past: consumption, a live lease, or failed deliveries.
UPDATE queen.consumer_state
   SET touched_at = coalesce(last_consumed_at, now())
 WHERE last_consumed_at IS NOT NULL OR consumed_total > 0 OR lease_id IS NOT NULL
    OR retry_count > 0;
