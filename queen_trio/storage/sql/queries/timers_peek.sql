-- One pending timer, with its payload as stored (GET /api/v1/timers/:queue/*timerKey).
SELECT t.queue, t.timer_key, t.partition, t.deliver_at, t.txn, t.message_id, t.payload,
       t.encrypted, t.producer_sub, t.attempts, t.last_error,
       (t.claim_token IS NOT NULL AND t.claimed_until > clock_timestamp()) AS claimed,
       t.created_at, t.updated_at
  FROM queen.timers t
 WHERE t.queue = :queue::text AND t.timer_key = :key::text
