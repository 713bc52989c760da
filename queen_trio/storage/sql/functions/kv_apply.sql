-- One KV call, in the caller's transaction, at one instant (now(): the transaction's start).
-- p_ops is already validated and ordered by the broker (single-key ops by (ns, key) in byte
-- order, multi-key reads last); each op carries `i`, its index in the request. Reads share a
-- byte budget of p_budget (getMany and getPrefix stop and say `truncated` past it).
-- Answers {"results": [...in p_ops order, each with "i"...], "failed": i of the first
-- `required` op that did not apply, or null}. The ops after a failed required one are not run:
-- the caller rolls the transaction back.
CREATE OR REPLACE FUNCTION queen.kv_apply(p_ops jsonb, p_budget bigint)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := now();
    v_op jsonb;
    v_kind text;
    v_res jsonb;
    v_results jsonb := '[]'::jsonb;
    v_used bigint := 0;
    v_rows jsonb;
    v_missing jsonb;
    v_truncated boolean;
    v_size bigint;
    v_key text;
    v_last text;
    v_limit integer;
    r record;
BEGIN
    FOR v_op IN SELECT e FROM jsonb_array_elements(p_ops) AS e LOOP
        v_kind := v_op->>'op';
        IF v_kind = 'get' THEN
            SELECT k.value, k.version, k.expires_at, k.updated_at INTO r
              FROM queen.kv k
             WHERE k.ns = v_op->>'ns' AND k.key = v_op->>'key'
               AND (k.expires_at IS NULL OR k.expires_at > v_now);
            IF FOUND THEN
                v_used := v_used + octet_length(r.value::text);
                v_res := jsonb_build_object('found', true, 'key', v_op->>'key',
                                            'value', r.value, 'version', r.version,
                                            'expiresAt', queen.kv_time(r.expires_at),
                                            'updatedAt', queen.kv_time(r.updated_at));
            ELSE
                v_res := jsonb_build_object('found', false, 'key', v_op->>'key');
            END IF;
        ELSIF v_kind = 'getMany' THEN
            v_rows := '[]'::jsonb;
            v_missing := '[]'::jsonb;
            v_truncated := false;
            FOR v_key IN SELECT jsonb_array_elements_text(v_op->'keys') LOOP
                SELECT k.value, k.version, k.expires_at, k.updated_at INTO r
                  FROM queen.kv k
                 WHERE k.ns = v_op->>'ns' AND k.key = v_key
                   AND (k.expires_at IS NULL OR k.expires_at > v_now);
                IF NOT FOUND THEN
                    v_missing := v_missing || to_jsonb(v_key);
                    CONTINUE;
                END IF;
                v_size := octet_length(r.value::text);
                IF v_used + v_size > p_budget THEN
                    v_truncated := true;
                    EXIT;
                END IF;
                v_used := v_used + v_size;
                v_rows := v_rows || jsonb_build_array(jsonb_build_object(
                    'key', v_key, 'value', r.value, 'version', r.version,
                    'expiresAt', queen.kv_time(r.expires_at),
                    'updatedAt', queen.kv_time(r.updated_at)));
            END LOOP;
            v_res := jsonb_build_object('rows', v_rows, 'missing', v_missing,
                                        'truncated', v_truncated);
        ELSIF v_kind = 'getPrefix' THEN
            v_rows := '[]'::jsonb;
            v_truncated := false;
            v_last := NULL;
            v_limit := (v_op->>'limit')::integer;
            FOR r IN
                SELECT k.key, k.value, k.version, k.expires_at, k.updated_at
                  FROM queen.kv k
                 WHERE k.ns = v_op->>'ns'
                   AND k.key >= (v_op->>'prefix') COLLATE "C"
                   AND left(k.key, length(v_op->>'prefix')) = (v_op->>'prefix') COLLATE "C"
                   AND (v_op->>'after' IS NULL OR k.key > (v_op->>'after') COLLATE "C")
                   AND (k.expires_at IS NULL OR k.expires_at > v_now)
                 ORDER BY k.key
                 LIMIT v_limit + 1
            LOOP
                IF jsonb_array_length(v_rows) >= v_limit THEN
                    v_truncated := true;
                    EXIT;
                END IF;
                v_size := CASE WHEN (v_op->>'keysOnly')::boolean THEN octet_length(r.key)
                               ELSE octet_length(r.value::text) END;
                IF v_used + v_size > p_budget AND jsonb_array_length(v_rows) > 0 THEN
                    v_truncated := true;
                    EXIT;
                END IF;
                v_used := v_used + v_size;
                v_last := r.key;
                IF (v_op->>'keysOnly')::boolean THEN
                    v_rows := v_rows || jsonb_build_array(jsonb_build_object(
                        'key', r.key, 'version', r.version,
                        'expiresAt', queen.kv_time(r.expires_at),
                        'updatedAt', queen.kv_time(r.updated_at)));
                ELSE
                    v_rows := v_rows || jsonb_build_array(jsonb_build_object(
                        'key', r.key, 'value', r.value, 'version', r.version,
                        'expiresAt', queen.kv_time(r.expires_at),
                        'updatedAt', queen.kv_time(r.updated_at)));
                END IF;
            END LOOP;
            v_res := jsonb_build_object('rows', v_rows, 'truncated', v_truncated,
                                        'nextAfter', v_last);
        ELSIF v_kind IN ('put', 'putIfAbsent') THEN
            v_res := queen.kv_put(v_op->>'ns', v_op->>'key', v_op->'value',
                                  (v_op->>'ttl')::integer, (v_op->>'expect')::bigint, v_now);
        ELSIF v_kind = 'delete' THEN
            v_res := queen.kv_delete(v_op->>'ns', v_op->>'key', (v_op->>'expect')::bigint,
                                     v_now);
        ELSIF v_kind = 'incr' THEN
            v_res := queen.kv_incr(v_op->>'ns', v_op->>'key', (v_op->>'delta')::numeric,
                                   (v_op->>'min')::numeric, (v_op->>'max')::numeric,
                                   (v_op->>'ttl')::integer, v_now);
        ELSIF v_kind = 'check' THEN
            v_res := queen.kv_check(v_op->>'ns', v_op->>'key', (v_op->>'expect')::bigint,
                                    v_now);
        ELSE
            RAISE EXCEPTION 'kv_apply: unknown op %', v_kind;
        END IF;
        v_results := v_results || jsonb_build_array(v_res || jsonb_build_object('i', v_op->'i'));
        IF (v_op->>'required')::boolean AND NOT (v_res->>'applied')::boolean THEN
            RETURN jsonb_build_object('results', v_results, 'failed', v_op->'i');
        END IF;
    END LOOP;
    RETURN jsonb_build_object('results', v_results, 'failed', NULL);
END;
$$;
