-- How many of p_lease_ids are live right now: a transaction's requiredLeases
-- (queries/live_leases). A function for its setting: consumer_leases is read by key whatever
-- its statistics say (functions/keep_consumer_index says why).
CREATE OR REPLACE FUNCTION queen.live_lease_count(p_lease_ids uuid[]) RETURNS bigint
LANGUAGE sql SET enable_seqscan = off AS $$
    SELECT count(DISTINCT cs.lease_id)
      FROM queen.consumer_leases l
      JOIN queen.consumer_state cs
        ON cs.partition_id = l.partition_id AND cs.consumer_group = l.consumer_group
     WHERE l.lease_id = ANY (p_lease_ids) AND cs.lease_id = l.lease_id
       AND cs.lease_expires_at > clock_timestamp()
$$;
