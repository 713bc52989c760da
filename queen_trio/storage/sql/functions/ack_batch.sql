-- Acks: retried dead letters first (settled against the dead letter, under the lease that
-- delivered them; the cursor is not theirs to move), everything else through
-- queen.ack_cursor. Same arguments and rows as queen.ack_cursor. It begins with "any retried
-- dead letter in flight?", answered from the index dead_letters_retry_lease.
CREATE OR REPLACE FUNCTION queen.ack_batch(
    p_groups     text[],
    p_partitions uuid[],
    p_txids      text[],
    p_statuses   text[],
    p_leases     uuid[],
    p_errors     text[]
) RETURNS TABLE (
    item_no        integer,
    success        boolean,
    error          text,
    queue_name     text,
    partition_name text,
    lease_released boolean,
    dlq            boolean,
    released       boolean
) LANGUAGE plpgsql AS $$
DECLARE
    n       integer := coalesce(array_length(p_partitions, 1), 0);
    taken   boolean[] := array_fill(false, ARRAY[greatest(n, 1)]);
    rest    integer[];
    it      record;
    pg      record;
    now_at  timestamptz := clock_timestamp();
    settled uuid[] := ARRAY[]::uuid[];
BEGIN
    IF n > 0 AND EXISTS (SELECT 1 FROM queen.dead_letters dl
                          WHERE dl.retry_lease_id IS NOT NULL) THEN
        -- Every state row of the call, in the order every writer locks them (ack_cursor
        -- takes them again without waiting).
        PERFORM 1 FROM queen.consumer_state cs
         WHERE (cs.partition_id, cs.consumer_group) IN (
               SELECT u.p, u.g FROM unnest(p_partitions, p_groups) AS u(p, g))
         ORDER BY cs.partition_id, cs.consumer_group
           FOR UPDATE;
        FOR it IN
            SELECT u.ord::integer AS ord, u.status, u.lease, u.err, dl.id AS dl_id,
                   dl.retry_lease_id, cs.lease_id AS state_lease,
                   cs.lease_expires_at, pp.name AS pname, qq.name AS qname
              FROM unnest(p_partitions, p_groups, p_txids, p_statuses, p_leases, p_errors)
                   WITH ORDINALITY AS u(p, g, txid, status, lease, err, ord)
              JOIN queen.dead_letters dl
                ON dl.partition_id = u.p AND dl.consumer_group = u.g
               AND dl.transaction_id = u.txid AND dl.retry_lease_id IS NOT NULL
              JOIN queen.consumer_state cs
                ON cs.partition_id = u.p AND cs.consumer_group = u.g
              JOIN queen.partitions pp ON pp.id = u.p
              JOIN queen.queues qq ON qq.id = pp.queue_id
             ORDER BY u.p, u.g, u.ord
        LOOP
            taken[it.ord] := true;
            item_no := it.ord; queue_name := it.qname; partition_name := it.pname;
            success := false; error := NULL; lease_released := false; dlq := false;
            released := false;
            IF it.state_lease IS DISTINCT FROM it.retry_lease_id OR it.lease_expires_at <= now_at
               OR (it.lease IS NOT NULL AND it.lease <> it.retry_lease_id) THEN
                error := 'Invalid or expired lease';
            ELSIF it.status IN ('completed', 'success') THEN
                DELETE FROM queen.dead_letters dl WHERE dl.id = it.dl_id;
                success := true;
            ELSIF it.status = 'retry' THEN
                -- Delivered again by the next claim, without counting.
                UPDATE queen.dead_letters dl SET retry_lease_id = NULL WHERE dl.id = it.dl_id;
                success := true;
            ELSIF it.status IN ('failed', 'dlq') THEN
                -- It stays dead for the group, with the newer error.
                UPDATE queen.dead_letters dl
                   SET retry_requested_at = NULL, retry_lease_id = NULL, failed_at = now_at,
                       error_message = coalesce(nullif(it.err, ''), dl.error_message)
                 WHERE dl.id = it.dl_id;
                success := true; dlq := true;
            ELSE
                error := 'Unknown status ' || coalesce(it.status, 'null');
            END IF;
            IF success THEN
                settled := settled || it.retry_lease_id;
            END IF;
            RETURN NEXT;
        END LOOP;
        -- A lease that delivered only retried dead letters ends once they are all settled.
        FOR pg IN
            SELECT cs.partition_id, cs.consumer_group, qq.name AS qname, pp.name AS pname
              FROM queen.consumer_state cs
              JOIN queen.partitions pp ON pp.id = cs.partition_id
              JOIN queen.queues qq ON qq.id = pp.queue_id
             WHERE cs.lease_id = ANY (settled) AND cs.delivered_until <= cs.cursor_offset
               AND NOT EXISTS (SELECT 1 FROM queen.dead_letters dl
                                WHERE dl.partition_id = cs.partition_id
                                  AND dl.consumer_group = cs.consumer_group
                                  AND dl.retry_lease_id = cs.lease_id)
             ORDER BY cs.partition_id, cs.consumer_group
        LOOP
            UPDATE queen.consumer_state cs
               SET lease_id = NULL, lease_expires_at = NULL, delivered_until = NULL,
                   head_at = queen.head_after(pg.partition_id, cs.cursor_offset)
             WHERE cs.partition_id = pg.partition_id AND cs.consumer_group = pg.consumer_group;
            item_no := NULL; success := NULL; error := NULL; queue_name := pg.qname;
            partition_name := pg.pname; lease_released := NULL; dlq := NULL; released := true;
            RETURN NEXT;
            PERFORM pg_notify('queen_push', pg.qname);
        END LOOP;
    END IF;
    IF n = 0 THEN
        RETURN;
    END IF;
    SELECT array_agg(i ORDER BY i) INTO rest FROM generate_series(1, n) i WHERE NOT taken[i];
    IF rest IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
        SELECT rest[a.item_no], a.success, a.error, a.queue_name, a.partition_name,
               a.lease_released, a.dlq, a.released
          FROM queen.ack_cursor(
                ARRAY(SELECT p_groups[i] FROM unnest(rest) WITH ORDINALITY AS x(i, k) ORDER BY k),
                ARRAY(SELECT p_partitions[i] FROM unnest(rest) WITH ORDINALITY AS x(i, k) ORDER BY k),
                ARRAY(SELECT p_txids[i] FROM unnest(rest) WITH ORDINALITY AS x(i, k) ORDER BY k),
                ARRAY(SELECT p_statuses[i] FROM unnest(rest) WITH ORDINALITY AS x(i, k) ORDER BY k),
                ARRAY(SELECT p_leases[i] FROM unnest(rest) WITH ORDINALITY AS x(i, k) ORDER BY k),
                ARRAY(SELECT p_errors[i] FROM unnest(rest) WITH ORDINALITY AS x(i, k) ORDER BY k)) a;
END;
$$;
