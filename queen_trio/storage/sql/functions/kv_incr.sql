-- incr: an atomic add in numeric. An absent or expired row counts as 0 and is created with
-- p_ttl (NULL: forever); a live row keeps its expiry and must hold a JSON number (`type`). The
-- result must lie within [p_min, p_max] (`limit`, with the current value): a refused increment
-- spends nothing.
CREATE OR REPLACE FUNCTION queen.kv_incr(p_ns text, p_key text, p_delta numeric,
                                         p_min numeric, p_max numeric, p_ttl integer,
                                         p_now timestamptz)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    v_found boolean;
    v_live boolean;
    v_new numeric;
    v_version bigint;
    v_expires timestamptz := CASE WHEN p_ttl IS NULL THEN NULL
                                  ELSE p_now + make_interval(secs => p_ttl) END;
BEGIN
    LOOP
        SELECT k.value, k.version, k.expires_at INTO r
          FROM queen.kv k WHERE k.ns = p_ns AND k.key = p_key
           FOR UPDATE;
        v_found := FOUND;
        v_live := v_found AND (r.expires_at IS NULL OR r.expires_at > p_now);
        IF v_live AND jsonb_typeof(r.value) <> 'number' THEN
            RETURN jsonb_build_object('applied', false, 'reason', 'type', 'value', r.value,
                                      'version', r.version);
        END IF;
        v_new := CASE WHEN v_live THEN (r.value #>> '{}')::numeric + p_delta ELSE p_delta END;
        IF (p_min IS NOT NULL AND v_new < p_min) OR (p_max IS NOT NULL AND v_new > p_max) THEN
            RETURN jsonb_build_object('applied', false, 'reason', 'limit',
                                      'value', CASE WHEN v_live THEN r.value END,
                                      'version', CASE WHEN v_live THEN r.version ELSE 0 END);
        END IF;
        IF v_live THEN  -- the row keeps its expiry
            UPDATE queen.kv
               SET value = to_jsonb(v_new), version = nextval('queen.kv_version_seq'),
                   updated_at = p_now
             WHERE ns = p_ns AND key = p_key
            RETURNING version, expires_at INTO v_version, v_expires;
            EXIT;
        END IF;
        IF v_found THEN  -- an expired row, locked above: a new window
            UPDATE queen.kv
               SET value = to_jsonb(v_new), version = nextval('queen.kv_version_seq'),
                   expires_at = v_expires, created_at = p_now, updated_at = p_now
             WHERE ns = p_ns AND key = p_key
            RETURNING version INTO v_version;
            EXIT;
        END IF;
        INSERT INTO queen.kv (ns, key, value, version, expires_at, created_at, updated_at)
        VALUES (p_ns, p_key, to_jsonb(v_new), 0, v_expires, p_now, p_now)
        ON CONFLICT (ns, key) DO NOTHING;
        IF FOUND THEN
            UPDATE queen.kv SET version = nextval('queen.kv_version_seq')
             WHERE ns = p_ns AND key = p_key
            RETURNING version INTO v_version;
            EXIT;
        END IF;
        -- A racer created it first: read it again, now that its insert has committed.
    END LOOP;
    RETURN jsonb_build_object('applied', true, 'value', to_jsonb(v_new), 'version', v_version,
                              'expiresAt', queen.kv_time(v_expires));
END;
$$;
