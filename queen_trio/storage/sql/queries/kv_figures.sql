-- For the metrics: live KV rows, and live lock permits.
SELECT count(*)::bigint AS live_rows,
       count(*) FILTER (WHERE k.ns = 'queen-locks')::bigint AS permits
  FROM queen.kv k
 WHERE k.expires_at IS NULL OR k.expires_at > now()
