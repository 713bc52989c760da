-- The consumer_leases rows of p_lease_ids, read by key whatever the table's statistics say
-- (functions/keep_consumer_index says why): a transaction's requiredLeases
-- (queries/live_leases) and the leases an ack of retried dead letters ends
-- (functions/ack_batch). A function for its setting, which a statement cannot carry.
CREATE OR REPLACE FUNCTION queen.leases_by_id(p_lease_ids uuid[])
RETURNS SETOF queen.consumer_leases LANGUAGE sql STABLE ROWS 10 SET enable_seqscan = off AS $$
    SELECT l.* FROM queen.consumer_leases l WHERE l.lease_id = ANY (p_lease_ids)
$$;
