-- POST /api/v1/transaction's requiredLeases: how many of them are live right now. The leases
-- are read through queen.leases_by_id: by key, whatever the table's statistics say.
SELECT count(DISTINCT cs.lease_id)
  FROM queen.leases_by_id(:lease_ids::uuid[]) l
  JOIN queen.consumer_state cs
    ON cs.partition_id = l.partition_id AND cs.consumer_group = l.consumer_group
 WHERE cs.lease_id = l.lease_id AND cs.lease_expires_at > clock_timestamp()
