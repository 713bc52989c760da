-- check: the expect rule, writing nothing, with the row locked FOR SHARE so that a later
-- writer of that row (a new holder's acquire, a renew) waits until this transaction ends. A
-- lock guard is this check on its permit row.
CREATE OR REPLACE FUNCTION queen.kv_check(p_ns text, p_key text, p_expect bigint,
                                          p_now timestamptz)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    v_live boolean;
BEGIN
    SELECT k.value, k.version, k.expires_at INTO r
      FROM queen.kv k WHERE k.ns = p_ns AND k.key = p_key
       FOR SHARE;
    v_live := FOUND AND (r.expires_at IS NULL OR r.expires_at > p_now);
    IF p_expect = 0 THEN
        IF NOT v_live THEN
            RETURN jsonb_build_object('applied', true, 'value', NULL, 'version', 0);
        END IF;
        RETURN jsonb_build_object('applied', false, 'reason', 'exists', 'value', r.value,
                                  'version', r.version);
    END IF;
    IF NOT v_live THEN
        RETURN jsonb_build_object('applied', false, 'reason', 'absent', 'value', NULL,
                                  'version', 0);
    END IF;
    IF r.version <> p_expect THEN
        RETURN jsonb_build_object('applied', false, 'reason', 'version', 'value', r.value,
                                  'version', r.version);
    END IF;
    RETURN jsonb_build_object('applied', true, 'value', r.value, 'version', r.version);
END;
$$;
