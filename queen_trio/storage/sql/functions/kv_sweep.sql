-- The expiry sweeper's batch: delete up to p_limit rows that expired at or before p_now, the
-- oldest first, skipping rows another transaction holds. Correctness never depends on it
-- (an expired row counts as absent everywhere). Returns the number deleted.
CREATE OR REPLACE FUNCTION queen.kv_sweep(p_now timestamptz, p_limit integer)
RETURNS integer
LANGUAGE sql AS $$
    WITH doomed AS (
        SELECT k.ns, k.key FROM queen.kv k
         WHERE k.expires_at IS NOT NULL AND k.expires_at <= p_now
         ORDER BY k.expires_at
         LIMIT p_limit
           FOR UPDATE SKIP LOCKED
    ), gone AS (
        DELETE FROM queen.kv k USING doomed d
         WHERE k.ns = d.ns AND k.key = d.key AND k.expires_at <= p_now
        RETURNING 1
    )
    SELECT count(*)::integer FROM gone
$$;
