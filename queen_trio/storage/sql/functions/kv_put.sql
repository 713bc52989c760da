-- put / putIfAbsent. p_expect NULL: upsert (value and expiry replaced). 0: only where no live
-- row exists (an expired one is overwritten); exactly one concurrent caller wins, since ON
-- CONFLICT locks the conflicting row before it judges it. N > 0: only where the live version
-- is N. p_ttl NULL is forever. The version is drawn only once the row lock is held: in the
-- UPDATE, or (a fresh insert) by an UPDATE of the row this transaction just inserted.
CREATE OR REPLACE FUNCTION queen.kv_put(p_ns text, p_key text, p_value jsonb, p_ttl integer,
                                        p_expect bigint, p_now timestamptz)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_expires timestamptz := CASE WHEN p_ttl IS NULL THEN NULL
                                  ELSE p_now + make_interval(secs => p_ttl) END;
    v_version bigint;
    v_inserted boolean;
BEGIN
    IF p_expect IS NULL OR p_expect = 0 THEN
        INSERT INTO queen.kv AS k (ns, key, value, version, expires_at, created_at, updated_at)
        VALUES (p_ns, p_key, p_value, 0, v_expires, p_now, p_now)
        ON CONFLICT (ns, key) DO UPDATE
           SET value = excluded.value,
               version = nextval('queen.kv_version_seq'),
               expires_at = excluded.expires_at,
               created_at = CASE WHEN k.expires_at IS NULL OR k.expires_at > p_now
                                 THEN k.created_at ELSE p_now END,
               updated_at = p_now
         WHERE p_expect IS NULL OR (k.expires_at IS NOT NULL AND k.expires_at <= p_now)
        RETURNING k.version, (k.xmax = 0) INTO v_version, v_inserted;
        IF NOT FOUND THEN
            RETURN queen.kv_current(p_ns, p_key, p_now, 'exists');
        END IF;
        IF v_inserted THEN
            UPDATE queen.kv SET version = nextval('queen.kv_version_seq')
             WHERE ns = p_ns AND key = p_key
            RETURNING version INTO v_version;
        END IF;
    ELSE
        UPDATE queen.kv
           SET value = p_value, version = nextval('queen.kv_version_seq'),
               expires_at = v_expires, updated_at = p_now
         WHERE ns = p_ns AND key = p_key AND version = p_expect
           AND (expires_at IS NULL OR expires_at > p_now)
        RETURNING version INTO v_version;
        IF NOT FOUND THEN
            RETURN queen.kv_current(p_ns, p_key, p_now, 'version');
        END IF;
    END IF;
    RETURN jsonb_build_object('applied', true, 'value', p_value, 'version', v_version,
                              'expiresAt', queen.kv_time(v_expires));
END;
$$;
