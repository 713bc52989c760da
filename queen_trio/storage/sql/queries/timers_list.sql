-- A queue's pending timers by key, after :after (exclusive), one more than asked for (so the
-- caller knows the page is truncated); no payloads (GET /api/v1/timers/:queue).
SELECT t.queue, t.timer_key, t.partition, t.deliver_at, t.txn, t.message_id,
       t.encrypted, t.producer_sub, t.attempts, t.last_error,
       (t.claim_token IS NOT NULL AND t.claimed_until > clock_timestamp()) AS claimed,
       t.created_at, t.updated_at, octet_length(t.payload) AS payload_bytes
  FROM queen.timers t
 WHERE t.queue = :queue::text AND t.timer_key > :after::text COLLATE "C"
 ORDER BY t.timer_key
 LIMIT :limit::integer + 1
