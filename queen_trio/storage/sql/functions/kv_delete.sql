-- delete. p_expect NULL: remove the row; applied only if it was live. 0: applied when no live
-- row exists (nothing is removed), else `exists`. N > 0: remove only at live version N.
CREATE OR REPLACE FUNCTION queen.kv_delete(p_ns text, p_key text, p_expect bigint,
                                           p_now timestamptz)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_live boolean;
    v_version bigint;
BEGIN
    IF p_expect IS NULL THEN
        DELETE FROM queen.kv
         WHERE ns = p_ns AND key = p_key
        RETURNING (expires_at IS NULL OR expires_at > p_now), version INTO v_live, v_version;
        IF FOUND AND v_live THEN
            RETURN jsonb_build_object('applied', true, 'version', v_version);
        END IF;
        RETURN jsonb_build_object('applied', false, 'reason', 'absent', 'value', NULL,
                                  'version', 0);
    ELSIF p_expect = 0 THEN
        PERFORM 1 FROM queen.kv
          WHERE ns = p_ns AND key = p_key AND (expires_at IS NULL OR expires_at > p_now)
            FOR UPDATE;
        IF NOT FOUND THEN
            RETURN jsonb_build_object('applied', true, 'version', 0);
        END IF;
        RETURN queen.kv_current(p_ns, p_key, p_now, 'exists');
    END IF;
    DELETE FROM queen.kv
     WHERE ns = p_ns AND key = p_key AND version = p_expect
       AND (expires_at IS NULL OR expires_at > p_now)
    RETURNING version INTO v_version;
    IF FOUND THEN
        RETURN jsonb_build_object('applied', true, 'version', v_version);
    END IF;
    RETURN queen.kv_current(p_ns, p_key, p_now, 'version');
END;
$$;
