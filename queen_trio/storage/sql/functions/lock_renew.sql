-- renew: the live permit `<name>#<slot>` whose token is p_token, or whose owner is p_owner (a
-- resent renew whose first attempt landed), gets a new lifetime of p_ttl seconds and a new,
-- higher token. A permit that expired is lost, even if nobody took it.
CREATE OR REPLACE FUNCTION queen.lock_renew(p_name text, p_token bigint, p_slot integer,
                                            p_owner text, p_ttl integer)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := now();
    v_token bigint;
BEGIN
    UPDATE queen.kv
       SET version = nextval('queen.kv_version_seq'),
           expires_at = v_now + make_interval(secs => p_ttl), updated_at = v_now
     WHERE ns = 'queen-locks' AND key = p_name || '#' || p_slot
       AND (expires_at IS NULL OR expires_at > v_now)
       AND (version = p_token OR (p_owner IS NOT NULL AND value->>'owner' = p_owner))
    RETURNING version INTO v_token;
    IF FOUND THEN
        RETURN jsonb_build_object('renewed', true, 'slot', p_slot, 'token', v_token);
    END IF;
    RETURN jsonb_build_object('renewed', false, 'reason', 'lost', 'slot', p_slot,
                              'holders', queen.lock_holders(p_name, v_now));
END;
$$;
