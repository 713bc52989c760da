-- Apply timer ops in the caller's transaction (functions/timers_apply).
SELECT ord, status, txn, message_id, deliver_at
  FROM queen.timers_apply(:ops::text[], :queues::text[], :keys::text[], :partitions::text[],
                          :delays::bigint[], :txns::text[], :payloads::bytea[],
                          :encrypted::boolean[], :producer_sub::text)
 ORDER BY ord
