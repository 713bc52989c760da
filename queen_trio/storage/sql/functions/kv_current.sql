-- The live row of (ns, key) as a write's verdict reports it, read in a statement of its own
-- (so after the write's own lock wait): `{applied: false, reason, value, version}` where reason
-- is `absent` (no live row) or p_reason_if_live. An expired row is absent.
CREATE OR REPLACE FUNCTION queen.kv_current(p_ns text, p_key text, p_now timestamptz,
                                            p_reason_if_live text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    SELECT k.value, k.version, k.expires_at INTO r
      FROM queen.kv k
     WHERE k.ns = p_ns AND k.key = p_key
       AND (k.expires_at IS NULL OR k.expires_at > p_now);
    IF NOT FOUND THEN
        RETURN jsonb_build_object('applied', false, 'reason', 'absent', 'value', NULL,
                                  'version', 0);
    END IF;
    RETURN jsonb_build_object('applied', false, 'reason', p_reason_if_live, 'value', r.value,
                              'version', r.version, 'expiresAt', queen.kv_time(r.expires_at));
END;
$$;
