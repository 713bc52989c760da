-- acquire: take a permit of lock p_name (p_limit permits: slots 0..p_limit-1) for p_ttl
-- seconds. The permit is a putIfAbsent of `<name>#<slot>`; its version is the fencing token.
-- An owner that already holds a slot gets it back (`already`), its expiry extended to at least
-- now + p_ttl and its token unchanged: a resent acquire is safe. With several slots a random
-- free one is tried, up to 4 times, before `contended`.
CREATE OR REPLACE FUNCTION queen.lock_acquire(p_name text, p_owner text, p_ttl integer,
                                              p_limit integer)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := now();
    v_holders jsonb;
    v_slot integer;
    v_free integer[];
    v_res jsonb;
    v_token bigint;
    v_attempt integer := 0;
BEGIN
    LOOP
        v_attempt := v_attempt + 1;
        v_holders := queen.lock_holders(p_name, v_now);
        IF p_owner IS NOT NULL THEN
            SELECT (h->>'slot')::integer, (h->>'token')::bigint INTO v_slot, v_token
              FROM jsonb_array_elements(v_holders) h
             WHERE h->>'owner' = p_owner AND (h->>'slot')::integer < p_limit
             ORDER BY (h->>'slot')::integer LIMIT 1;
            IF FOUND THEN
                UPDATE queen.kv
                   SET expires_at = greatest(expires_at, v_now + make_interval(secs => p_ttl))
                 WHERE ns = 'queen-locks' AND key = p_name || '#' || v_slot
                   AND version = v_token;
                IF FOUND THEN
                    RETURN jsonb_build_object('acquired', true, 'already', true,
                                              'slot', v_slot, 'token', v_token,
                                              'owner', p_owner);
                END IF;
                CONTINUE;  -- it moved under us: look again
            END IF;
        END IF;
        SELECT array_agg(s) INTO v_free
          FROM generate_series(0, p_limit - 1) s
         WHERE NOT EXISTS (SELECT 1 FROM jsonb_array_elements(v_holders) h
                            WHERE (h->>'slot')::integer = s);
        IF v_free IS NULL THEN
            RETURN jsonb_build_object('acquired', false, 'reason', 'held',
                                      'holders', v_holders);
        END IF;
        IF v_attempt > 4 THEN
            RETURN jsonb_build_object('acquired', false, 'reason', 'contended',
                                      'holders', v_holders);
        END IF;
        v_slot := v_free[1 + floor(random() * array_length(v_free, 1))::integer];
        v_res := queen.kv_put('queen-locks', p_name || '#' || v_slot,
                              jsonb_build_object('owner', p_owner,
                                                 'since', queen.kv_time(v_now)),
                              p_ttl, 0, v_now);
        IF (v_res->>'applied')::boolean THEN
            RETURN jsonb_build_object('acquired', true, 'slot', v_slot,
                                      'token', (v_res->>'version')::bigint, 'owner', p_owner);
        END IF;
    END LOOP;
END;
$$;
