-- The sweeper's claim (docs/timers.md#firing): up to p_limit timers visible now (due, and
-- not held by a live claim or in a backoff), the earliest first, skipping rows another
-- broker is claiming. Each gets this claim's token and a short lease: no other broker
-- claims it until the lease lapses, and a schedule or a cancel answers too_late meanwhile.
-- Its own short transaction; the fire deletes only the rows that still carry the token.
-- "Now" is read once, as an InitPlan, so the index bounds the scan: compared row by row
-- (clock_timestamp() is volatile, never an index condition), a claim that found fewer than
-- p_limit due timers walked every pending one (47 ms and 2,048 buffers beside 100,000
-- timers due an hour later; 13 buffers this way: docs/performance.md#timers).
CREATE OR REPLACE FUNCTION queen.timers_claim(p_token uuid, p_lease_ms integer,
                                              p_limit integer)
RETURNS TABLE (queue text, timer_key text) LANGUAGE sql AS $$
    WITH due AS (
        SELECT t.queue, t.timer_key
          FROM queen.timers t
         WHERE t.visible_at <= (SELECT clock_timestamp())
         ORDER BY t.visible_at
         LIMIT p_limit
           FOR UPDATE SKIP LOCKED
    )
    UPDATE queen.timers t
       SET claim_token = p_token,
           claimed_until = clock_timestamp() + make_interval(secs => p_lease_ms / 1000.0)
      FROM due
     WHERE t.queue = due.queue AND t.timer_key = due.timer_key
    RETURNING t.queue, t.timer_key;
$$;
