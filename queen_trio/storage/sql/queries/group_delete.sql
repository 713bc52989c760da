-- Drop a group's cursors and leases (of one queue, or every queue) and its subscriptions; with
-- :keep_start the subscription starts are remembered for the next join (queen.join_group).
-- The caller locked the state rows first (group_lock_states).
WITH subs AS (
    DELETE FROM queen.subscriptions s
     WHERE s.consumer_group = :consumer_group
       AND (:queue_id::uuid IS NULL OR s.queue_id = :queue_id)
    RETURNING s.queue_id, s.start_at
), remembered AS (
    INSERT INTO queen.subscription_memory (queue_id, consumer_group, start_at)
    SELECT subs.queue_id, :consumer_group, subs.start_at FROM subs WHERE :keep_start::boolean
    ON CONFLICT (queue_id, consumer_group) DO UPDATE SET start_at = EXCLUDED.start_at
    RETURNING 1
), forgotten AS (
    DELETE FROM queen.subscription_memory m
     WHERE m.consumer_group = :consumer_group AND NOT :keep_start::boolean
       AND (:queue_id::uuid IS NULL OR m.queue_id = :queue_id)
    RETURNING 1
), states AS (
    DELETE FROM queen.consumer_state cs
     WHERE cs.consumer_group = :consumer_group
       AND (:queue_id::uuid IS NULL OR cs.queue_id = :queue_id)
    RETURNING cs.touched_at
)
-- Every state row goes; the count is of the partitions the group had touched (touched_at), as
-- the reference counts.
SELECT (SELECT count(*) FROM states WHERE touched_at IS NOT NULL) AS deleted_partitions,
       (SELECT count(*) FROM subs) + (SELECT count(*) FROM forgotten) AS subscriptions,
       (SELECT count(*) FROM remembered) AS remembered
