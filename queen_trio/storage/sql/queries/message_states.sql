-- Every group's position on the given partitions: its cursor, its lease as stored and the
-- database's clock (ops/message_view.py decides from these whether the lease is live, and
-- every message's status).
SELECT cs.partition_id, cs.consumer_group, cs.cursor_offset, cs.retry_count,
       cs.lease_id, cs.delivered_until, cs.lease_expires_at, now() AS read_at
  FROM queen.consumer_state cs
 WHERE cs.partition_id = ANY (:partition_ids::uuid[])
