-- Schedule, reschedule and cancel timers (docs/timers.md), in one transaction: the caller's
-- (POST /api/v1/timers, DELETE /api/v1/timers/..., or a transaction's timers rider). Ops are
-- applied in ascending (queue, timer_key) byte order, the lock order of timer rows
-- (docs/decisions.md#timers); one row per op comes back, numbered by its input position.
-- A timer a broker holds right now (claim token set, claim not lapsed) is neither replaced nor
-- cancelled: `too_late`. A failed fire's backoff holds no token, so it can be.
CREATE OR REPLACE FUNCTION queen.timers_apply(
    p_ops        text[],      -- 'schedule' (reschedule is the same upsert) or 'cancel'
    p_queues     text[],
    p_keys       text[],
    p_partitions text[],
    p_delays     bigint[],    -- milliseconds; negative fires at once
    p_txns       text[],      -- a cancel's: the txn to echo when absent (may be NULL)
    p_payloads   bytea[],
    p_encrypted  boolean[],
    p_producer_sub text
) RETURNS TABLE (
    ord        integer,
    status     text,
    txn        text,
    message_id uuid,
    deliver_at timestamptz
) LANGUAGE plpgsql AS $$
DECLARE
    v_now  timestamptz := clock_timestamp();
    v_at   timestamptz;
    v_id   bytea;
    v_inserted boolean;
    r      record;
BEGIN
    FOR r IN SELECT u.i::integer AS i, u.op, u.q, u.k, u.p, u.d, u.t, u.pl, u.enc
               FROM unnest(p_ops, p_queues, p_keys, p_partitions, p_delays, p_txns,
                           p_payloads, p_encrypted)
                    WITH ORDINALITY AS u(op, q, k, p, d, t, pl, enc, i)
              ORDER BY u.q COLLATE "C", u.k COLLATE "C"
    LOOP
        ord := r.i;
        IF r.op = 'cancel' THEN
            DELETE FROM queen.timers tm
             WHERE tm.queue = r.q AND tm.timer_key = r.k
               AND (tm.claim_token IS NULL OR tm.claimed_until <= clock_timestamp())
            RETURNING tm.txn INTO txn;
            IF FOUND THEN
                status := 'cancelled';
            ELSIF EXISTS (SELECT 1 FROM queen.timers tm
                           WHERE tm.queue = r.q AND tm.timer_key = r.k) THEN
                status := 'too_late'; txn := NULL;
            ELSE
                status := 'absent'; txn := r.t;
            END IF;
            message_id := NULL; deliver_at := NULL;
            RETURN NEXT;
            CONTINUE;
        END IF;
        -- "Not before", on this clock; a delay in the past fires on the next cycle.
        v_at := v_now + make_interval(secs => greatest(r.d, 0) / 1000.0);
        -- The promised message id: a UUIDv7 whose time is deliver_at, so it sorts where the
        -- message will land in its partition (push/timers fire: docs/decisions.md#timers).
        v_id := uuid_send(gen_random_uuid());
        v_id := overlay(v_id PLACING substring(int8send(
                    floor(extract(epoch FROM v_at) * 1000)::bigint) FROM 3 FOR 6) FROM 1 FOR 6);
        v_id := set_byte(v_id, 6, (get_byte(v_id, 6) & 15) | 112);
        INSERT INTO queen.timers AS tm
               (queue, timer_key, partition, deliver_at, txn, message_id, payload, encrypted,
                producer_sub)
        VALUES (r.q, r.k, r.p, v_at, r.t, encode(v_id, 'hex')::uuid, r.pl, r.enc,
                p_producer_sub)
        ON CONFLICT (queue, timer_key) DO UPDATE
           SET partition = excluded.partition, deliver_at = excluded.deliver_at,
               txn = excluded.txn, message_id = excluded.message_id,
               payload = excluded.payload, encrypted = excluded.encrypted,
               producer_sub = excluded.producer_sub, attempts = 0, last_error = NULL,
               claim_token = NULL, claimed_until = NULL, updated_at = clock_timestamp()
         WHERE tm.claim_token IS NULL OR tm.claimed_until <= clock_timestamp()
        RETURNING (tm.xmax = 0), tm.txn, tm.message_id, tm.deliver_at
             INTO v_inserted, txn, message_id, deliver_at;
        IF FOUND THEN
            status := CASE WHEN v_inserted THEN 'scheduled' ELSE 'rescheduled' END;
            IF v_at <= clock_timestamp() + interval '2 seconds' THEN
                -- Due now or soon: wake every broker's sweeper (a later one is found by
                -- its probe, at most a second late).
                PERFORM pg_notify('queen_timers', to_char(v_at, 'YYYY-MM-DD"T"HH24:MI:SS.US'));
            END IF;
        ELSE
            status := 'too_late'; txn := NULL; message_id := NULL; deliver_at := NULL;
        END IF;
        RETURN NEXT;
    END LOOP;
END;
$$;
