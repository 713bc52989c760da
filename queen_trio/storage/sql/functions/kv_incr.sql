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
    v_new numeric;
    v_version bigint;
    v_expires timestamptz := CASE WHEN p_ttl IS NULL THEN NULL
                                  ELSE p_now + make_interval(secs => p_ttl) END;
BEGIN
    LOOP
        SELECT k.value, k.version, k.expires_at INTO r
          FROM queen.kv k WHERE k.ns = p_ns AND k.key = p_key
           FOR UPDATE;
        IF FOUND AND (r.expires_at IS NULL OR r.expires_at > p_now) THEN
            IF jsonb_typeof(r.value) <> 'number' THEN
                RETURN jsonb_build_object('applied', false, 'reason', 'type', 'value', r.value,
                                          'version', r.version);
            END IF;
            v_new := (r.value #>> '{}')::numeric + p_delta;
            IF (p_min IS NOT NULL AND v_new < p_min) OR (p_max IS NOT NULL AND v_new > p_max) THEN
                RETURN jsonb_build_object('applied', false, 'reason', 'limit', 'value', r.value,
                                          'version', r.version);
            END IF;
            UPDATE queen.kv
               SET value = to_jsonb(v_new), version = nextval('queen.kv_version_seq'),
                   updated_at = p_now
             WHERE ns = p_ns AND key = p_key
            RETURNING version, expires_at INTO v_version, v_expires;
            RETURN jsonb_build_object('applied', true, 'value', to_jsonb(v_new),
                                      'version', v_version,
                                      'expiresAt', queen.kv_time(v_expires));
        END IF;
        v_new := p_delta;
        IF (p_min IS NOT NULL AND v_new < p_min) OR (p_max IS NOT NULL AND v_new > p_max) THEN
            RETURN jsonb_build_object('applied', false, 'reason', 'limit', 'value', NULL,
                                      'version', 0);
        END IF;
        IF FOUND THEN  -- an expired row, locked above: a new window
            UPDATE queen.kv
               SET value = to_jsonb(v_new), version = nextval('queen.kv_version_seq'),
                   expires_at = v_expires, created_at = p_now, updated_at = p_now
             WHERE ns = p_ns AND key = p_key
            RETURNING version INTO v_version;
            RETURN jsonb_build_object('applied', true, 'value', to_jsonb(v_new),
                                      'version', v_version,
                                      'expiresAt', queen.kv_time(v_expires));
        END IF;
        INSERT INTO queen.kv (ns, key, value, version, expires_at, created_at, updated_at)
        VALUES (p_ns, p_key, to_jsonb(v_new), 0, v_expires, p_now, p_now)
        ON CONFLICT (ns, key) DO NOTHING;
        IF FOUND THEN
            UPDATE queen.kv SET version = nextval('queen.kv_version_seq')
             WHERE ns = p_ns AND key = p_key
            RETURNING version INTO v_version;
            RETURN jsonb_build_object('applied', true, 'value', to_jsonb(v_new),
                                      'version', v_version,
                                      'expiresAt', queen.kv_time(v_expires));
        END IF;
        -- A racer created it first: read it again, now that its insert has committed.
    END LOOP;
END;
$$;
