-- A KV timestamp on the wire: UTC ISO-8601, microseconds, `Z`, fixed width; NULL stays NULL.
CREATE OR REPLACE FUNCTION queen.kv_time(p_at timestamptz)
RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;
