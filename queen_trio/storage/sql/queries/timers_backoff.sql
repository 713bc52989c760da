-- A failed fire (docs/timers.md#firing): let the claim go and hide the timer for a backoff
-- that doubles with each failure (up to a minute). No token: it can be cancelled meanwhile.
UPDATE queen.timers t
   SET claim_token = NULL,
       claimed_until = clock_timestamp()
                       + make_interval(secs => least(60, power(2, least(t.attempts, 6)))),
       attempts = t.attempts + 1,
       last_error = :error::text,
       updated_at = clock_timestamp()
 WHERE t.claim_token = :token::uuid
   AND (:queues::text[] IS NULL
        OR (t.queue, t.timer_key) IN (SELECT * FROM unnest(:queues::text[], :keys::text[])))
