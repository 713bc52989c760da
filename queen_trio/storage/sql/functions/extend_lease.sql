-- Extend every partition leased under p_lease_id to max(current, now + seconds); an expired
-- lease is never revived. The lease's partitions are found in queen.consumer_leases, by key
-- whatever its statistics say (functions/keep_consumer_index says why).
CREATE OR REPLACE FUNCTION queen.extend_lease(p_lease_id uuid, p_seconds integer)
RETURNS TABLE (renewed integer, expires_at timestamptz, problem text)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    now_at timestamptz := clock_timestamp();
BEGIN
    WITH extended AS (
        UPDATE queen.consumer_state cs
           SET lease_expires_at = greatest(cs.lease_expires_at,
                                           now_at + make_interval(secs => p_seconds))
          FROM queen.consumer_leases l
         WHERE l.lease_id = p_lease_id
           AND cs.partition_id = l.partition_id AND cs.consumer_group = l.consumer_group
           AND cs.lease_id = p_lease_id AND cs.lease_expires_at > now_at
        RETURNING cs.lease_expires_at
    )
    SELECT count(*)::integer, min(e.lease_expires_at) INTO renewed, expires_at FROM extended e;
    IF renewed = 0 THEN
        problem := CASE WHEN EXISTS (SELECT 1 FROM queen.consumer_leases l
                                      WHERE l.lease_id = p_lease_id)
                        THEN 'Lease already expired' ELSE 'Lease not found' END;
    END IF;
    RETURN NEXT;
END;
$$;
