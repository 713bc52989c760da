-- The fire's first step, inside its transaction: delete the timers this claim still holds
-- and return them (a timer rescheduled, cancelled or re-claimed after the lease lapsed is not
-- here, and is not pushed). The row locks are held to the commit: nobody claims them again.
DELETE FROM queen.timers t
 WHERE t.claim_token = :token::uuid
   AND (:queues::text[] IS NULL
        OR (t.queue, t.timer_key) IN (SELECT * FROM unnest(:queues::text[], :keys::text[])))
RETURNING t.queue, t.timer_key, t.partition, t.deliver_at, t.txn, t.message_id, t.payload,
          t.encrypted, t.producer_sub,
          extract(epoch FROM clock_timestamp() - t.deliver_at)::float8 AS lateness
