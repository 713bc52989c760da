-- How many of p_lease_ids are live right now: a transaction's requiredLeases
-- (queries/live_leases).
CREATE OR REPLACE FUNCTION queen.live_lease_count(p_lease_ids uuid[]) RETURNS bigint
LANGUAGE sql AS $$
    SELECT count(DISTINCT cs.lease_id)
      FROM queen.leases_by_id(p_lease_ids) l
      JOIN queen.consumer_state cs
        ON cs.partition_id = l.partition_id AND cs.consumer_group = l.consumer_group
     WHERE cs.lease_id = l.lease_id AND cs.lease_expires_at > clock_timestamp()
$$;
