-- POST /consumer-groups/:group/subscription: a new start for every subscription of the group
-- (and a remembered one); partitions where it has consumed nothing and holds no live lease
-- start over from it. The caller locked the state rows (group_lock_states).
WITH subs AS (
    UPDATE queen.subscriptions s SET start_at = :start_at
     WHERE s.consumer_group = :consumer_group
    RETURNING 1
), remembered AS (
    UPDATE queen.subscription_memory m SET start_at = :start_at
     WHERE m.consumer_group = :consumer_group
    RETURNING 1
), moved AS (
    UPDATE queen.consumer_state cs
       SET start_at = :start_at,
           cursor_offset = coalesce(f.first_offset, p.next_offset),
           head_at = f.created_at,
           retry_count = 0, not_before = NULL,
           lease_id = NULL, lease_expires_at = NULL, delivered_until = NULL
      FROM queen.partitions p
      LEFT JOIN LATERAL (
            SELECT s.first_offset, s.created_at FROM queen.segments s
             WHERE s.partition_id = p.id AND s.created_at >= :start_at
             ORDER BY s.created_at, s.first_offset
             LIMIT 1) f ON true
     WHERE p.id = cs.partition_id AND cs.consumer_group = :consumer_group
       AND cs.consumed_total = 0
       AND (cs.lease_id IS NULL OR cs.lease_expires_at <= now())
    RETURNING 1
)
SELECT (SELECT count(*) FROM subs) + (SELECT count(*) FROM remembered) AS rows_updated,
       (SELECT count(*) FROM moved) AS partitions_moved
