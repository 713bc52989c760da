-- Every live lock permit, by lock name and slot: the dashboard's Locks page, `locks list`.
SELECT left(k.key, length(k.key) - strpos(reverse(k.key), '#')) AS name,
       substr(k.key, length(k.key) - strpos(reverse(k.key), '#') + 2)::integer AS slot,
       k.value->>'owner' AS owner, k.version AS token,
       coalesce(k.value->>'since', queen.kv_time(k.created_at)) AS since, queen.kv_time(k.expires_at) AS expires_at,
       queen.kv_time(k.updated_at) AS renewed_at
  FROM queen.kv k
 WHERE k.ns = 'queen-locks'
   AND k.key ~ '#(0|[1-9][0-9]{0,3})$'
   AND (k.expires_at IS NULL OR k.expires_at > now())
 ORDER BY 1, 2
 LIMIT :lim
