-- POST /api/v1/transaction's requiredLeases: how many of them are live right now.
SELECT count(DISTINCT cs.lease_id)
  FROM queen.consumer_leases l
  JOIN queen.consumer_state cs
    ON cs.partition_id = l.partition_id AND cs.consumer_group = l.consumer_group
 WHERE l.lease_id = ANY(:lease_ids::uuid[]) AND cs.lease_id = l.lease_id
   AND cs.lease_expires_at > clock_timestamp()
