-- release: remove the live permit `<name>#<slot>` at token p_token. Anything else is `lost`
-- (a resent release after success answers that too; the handle ignores it).
CREATE OR REPLACE FUNCTION queen.lock_release(p_name text, p_token bigint, p_slot integer)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := now();
BEGIN
    DELETE FROM queen.kv
     WHERE ns = 'queen-locks' AND key = p_name || '#' || p_slot AND version = p_token
       AND (expires_at IS NULL OR expires_at > v_now);
    IF FOUND THEN
        RETURN jsonb_build_object('released', true, 'slot', p_slot);
    END IF;
    RETURN jsonb_build_object('released', false, 'reason', 'lost', 'slot', p_slot,
                              'holders', queen.lock_holders(p_name, v_now));
END;
$$;
