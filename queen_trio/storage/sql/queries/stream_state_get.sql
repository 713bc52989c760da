-- POST /streams/v1/state/get: one shard's rows in byte order of key; filtered by a key list
-- (empty: every key), a real prefix (not LIKE) and windowEnd (a JSON number) at or before
-- :ripe (numeric comparison).
SELECT key, value, updated_at FROM queen.stream_state
 WHERE query_id = :query_id::uuid AND partition_id = :partition_id::uuid
   AND (cardinality(:keys::text[]) = 0 OR key = ANY(:keys::text[]))
   AND (:prefix::text IS NULL OR starts_with(key, :prefix::text))
   AND (:ripe::numeric IS NULL
        OR (jsonb_typeof(value -> 'windowEnd') = 'number'
            AND (value ->> 'windowEnd')::numeric <= :ripe::numeric))
 ORDER BY key
