-- The live permits of a lock or semaphore: rows `<name>#<slot>` of namespace `queen-locks`
-- whose slot is canonical (decimal, no leading zeros), in slot order.
CREATE OR REPLACE FUNCTION queen.lock_holders(p_name text, p_now timestamptz)
RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'slot', substr(k.key, length(p_name) + 2)::integer,
               'owner', k.value->'owner',
               'token', k.version,
               'since', coalesce(k.value->'since', to_jsonb(queen.kv_time(k.created_at))),
               'expiresAt', queen.kv_time(k.expires_at),
               'renewedAt', queen.kv_time(k.updated_at))
             ORDER BY substr(k.key, length(p_name) + 2)::integer), '[]'::jsonb)
      FROM queen.kv k
     WHERE k.ns = 'queen-locks'
       AND k.key LIKE replace(replace(replace(p_name, '\', '\\'), '%', '\%'), '_', '\_') || '#%'
       AND substr(k.key, length(p_name) + 2) ~ '^(0|[1-9][0-9]{0,3})$'
       AND (k.expires_at IS NULL OR k.expires_at > p_now)
$$;
