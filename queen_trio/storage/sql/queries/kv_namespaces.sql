-- The dashboard's and the CLI's KV overview: live rows and bytes per namespace.
SELECT k.ns, count(*)::bigint AS rows, sum(octet_length(k.value::text))::bigint AS bytes,
       min(k.expires_at) AS next_expiry, max(k.updated_at) AS last_write
  FROM queen.kv k
 WHERE k.expires_at IS NULL OR k.expires_at > now()
 GROUP BY k.ns
 ORDER BY k.ns
