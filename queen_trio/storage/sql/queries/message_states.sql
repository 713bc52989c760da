-- Every group's position on the given partitions (message statuses), and whether it has
-- dead letters there.
SELECT cs.partition_id, cs.consumer_group, cs.cursor_offset, cs.retry_count,
       CASE WHEN cs.lease_id IS NOT NULL AND cs.lease_expires_at > now()
            THEN cs.delivered_until END AS leased_until,
       CASE WHEN cs.lease_id IS NOT NULL AND cs.lease_expires_at > now()
            THEN cs.lease_expires_at END AS lease_expires_at
  FROM queen.consumer_state cs
 WHERE cs.partition_id = ANY (:partition_ids::uuid[])
