-- Settle acknowledgements (docs/decisions.md#acks), of one request or of several fused by the
-- ack lane; each item names its group. Returns one row per item (its 1-based position in the
-- arrays), then `released` rows: the lease of the partition was released with messages still
-- pending (long polls of the queue should look again).
--
-- Retried dead letters first: settled against the dead letter, under the lease that delivered
-- them (the cursor is not theirs to move). It begins with "any retried dead letter in
-- flight?", answered from the index dead_letters_retry_lease.
--
-- Every other item moves the cursor: items are applied per (partition, group), in ascending
-- partition id (the lock order), in offset order within it.
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
    n          integer := coalesce(array_length(p_partitions, 1), 0);
    taken      boolean[] := array_fill(false, ARRAY[greatest(n, 1)]);
    settled    uuid[] := ARRAY[]::uuid[];
    now_at     timestamptz := clock_timestamp();
    pid        uuid;
    grp        text;
    pg         record;
    st         record;
    q          record;
    it         record;
    cur        bigint;
    retries    integer;
    live       boolean;
    stopped    boolean;
    counted    boolean;
    exhausted  boolean;
    moved      boolean;
    release_it boolean;
    nacked     boolean;
    delay_ms   integer;
    -- The partitions whose lease this call released (queue and partition names).
    freed_q    text[] := ARRAY[]::text[];
    freed_p    text[] := ARRAY[]::text[];
    k          integer;
BEGIN
    IF n > 0 AND EXISTS (SELECT 1 FROM queen.dead_letters dl
                          WHERE dl.retry_lease_id IS NOT NULL) THEN
        -- Every state row of the call, in the order every writer locks them (the cursor
        -- loop below takes them again without waiting).
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
              JOIN queen.partition_names pp ON pp.id = u.p
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
              FROM queen.leases_by_id(settled) l
              JOIN queen.consumer_state cs
                ON cs.partition_id = l.partition_id AND cs.consumer_group = l.consumer_group
              JOIN queen.partition_names pp ON pp.id = cs.partition_id
              JOIN queen.queues qq ON qq.id = pp.queue_id
             WHERE cs.lease_id = l.lease_id
               AND cs.delivered_until <= cs.cursor_offset
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
            freed_q := freed_q || pg.qname;
            freed_p := freed_p || pg.pname;
        END LOOP;
    END IF;
    -- Everything else moves the cursor, per (partition, group) in the lock order.
    FOR pg IN SELECT DISTINCT u.p, u.g
                FROM unnest(p_partitions, p_groups) WITH ORDINALITY AS u(p, g, ord)
               WHERE NOT taken[u.ord::integer]
               ORDER BY u.p, u.g LOOP
        pid := pg.p;
        grp := pg.g;
        -- row_at: where the locked row lies, for the update below (a look-up by key walks
        -- every version of the row that a held xmin keeps).
        SELECT cs.*, cs.ctid AS row_at, p.name AS pname INTO st
          FROM queen.consumer_state cs JOIN queen.partition_names p ON p.id = cs.partition_id
         WHERE cs.partition_id = pid AND cs.consumer_group = grp
           FOR UPDATE OF cs;
        IF st IS NULL THEN
            SELECT qq.name, qq.retry_limit, qq.retry_delay, qq.dead_letter_queue INTO q
              FROM queen.partition_names p JOIN queen.queues qq ON qq.id = p.queue_id
             WHERE p.id = pid;
        ELSE
            -- Through the state row: a partition row is updated by every push, and under a
            -- held xmin each read of it walks its versions. (A record IS NULL only when the
            -- look-up found no row; IS NOT NULL would need every field set.)
            SELECT qq.name, qq.retry_limit, qq.retry_delay, qq.dead_letter_queue INTO q
              FROM queen.queues qq WHERE qq.id = st.queue_id;
        END IF;

        IF st IS NULL THEN
            FOR it IN SELECT u.ord::integer AS ord
                        FROM unnest(p_partitions, p_groups) WITH ORDINALITY AS u(p, g, ord)
                       WHERE u.p = pid AND u.g = grp AND NOT taken[u.ord::integer] LOOP
                item_no := it.ord; success := false; dlq := false; released := false;
                lease_released := NULL; queue_name := q.name; partition_name := NULL;
                error := CASE WHEN q IS NULL THEN 'Message not found'
                              ELSE 'Message was not delivered to consumer group ' || grp END;
                RETURN NEXT;
            END LOOP;
            CONTINUE;
        END IF;

        cur := st.cursor_offset;
        retries := st.retry_count;
        live := st.lease_id IS NOT NULL AND st.lease_expires_at > now_at;
        stopped := false; counted := false; exhausted := false; moved := false;
        release_it := false; nacked := false;

        FOR it IN
            SELECT u.ord::integer AS ord, u.txid, u.status, u.lease, u.err, hit.message_offset AS off,
                   (hit.message_offset IS NULL AND EXISTS (
                        SELECT 1 FROM queen.transaction_index t
                         WHERE t.partition_id = pid AND t.transaction_id = u.txid)) AS settled
              FROM unnest(p_partitions, p_groups, p_txids, p_statuses, p_leases, p_errors)
                   WITH ORDINALITY AS u(p, g, txid, status, lease, err, ord)
              LEFT JOIN LATERAL (
                    SELECT t.message_offset FROM queen.transaction_index t
                     WHERE t.partition_id = pid AND t.transaction_id = u.txid
                       AND t.message_offset >= st.cursor_offset
                     ORDER BY t.message_offset LIMIT 1) hit ON true
             WHERE u.p = pid AND u.g = grp AND NOT taken[u.ord::integer]
             ORDER BY hit.message_offset NULLS LAST, u.ord
        LOOP
            item_no := it.ord; queue_name := q.name; partition_name := st.pname;
            success := false; error := NULL; lease_released := false; dlq := false;
            released := false;
            IF it.off IS NULL THEN
                error := CASE WHEN it.settled THEN 'Message already settled for this consumer group'
                              ELSE 'Message not found' END;
            ELSIF it.lease IS NOT NULL AND (NOT live OR it.lease IS DISTINCT FROM st.lease_id) THEN
                error := 'Invalid or expired lease';
            ELSIF NOT live THEN
                error := 'Message is not leased to this consumer group (no live lease)';
            ELSIF it.off < cur THEN
                error := 'Message already settled for this consumer group';
            ELSIF it.off >= st.delivered_until THEN
                error := 'Message was not delivered under the current lease';
            ELSIF stopped AND it.status IN ('failed', 'retry') THEN
                -- Part of the same nack: the delivery is already released for redelivery.
                success := true; lease_released := true;
            ELSIF stopped THEN
                error := 'Not applied: an earlier message of this partition was not settled in this call';
            ELSIF it.status IN ('completed', 'success') THEN
                cur := it.off + 1; moved := true; retries := 0; exhausted := false;
                success := true;
            ELSIF it.status = 'dlq' THEN
                PERFORM queen.dead_letter(pid, grp, it.off,
                                          coalesce(nullif(it.err, ''), 'Dead-lettered by the consumer'),
                                          retries);
                cur := it.off + 1; moved := true; retries := 0;
                success := true; dlq := true;
            ELSIF it.status = 'failed' THEN
                IF NOT counted THEN
                    retries := retries + 1;
                    counted := true;
                    exhausted := retries > q.retry_limit;
                END IF;
                IF exhausted AND it.off = cur THEN
                    IF q.dead_letter_queue THEN
                        PERFORM queen.dead_letter(pid, grp, it.off,
                                                  coalesce(nullif(it.err, ''), 'Retries exhausted'),
                                                  retries - 1);
                        dlq := true;
                    ELSE
                        RAISE LOG 'queen: dropped exhausted message % of partition % for group %',
                            it.off, pid, grp;
                    END IF;
                    cur := it.off + 1; moved := true;
                    success := true;
                ELSE
                    stopped := true; release_it := true; nacked := true;
                    success := true; lease_released := true;
                END IF;
            ELSIF it.status = 'retry' THEN
                stopped := true; release_it := true;
                success := true; lease_released := true;
            ELSE
                error := 'Unknown status ' || coalesce(it.status, 'null');
            END IF;
            IF success AND NOT release_it AND cur >= st.delivered_until THEN
                -- Every message of the delivery is settled: the lease ends here.
                release_it := true; lease_released := true;
            END IF;
            RETURN NEXT;
        END LOOP;

        IF exhausted AND moved AND NOT nacked THEN
            retries := 0;
        END IF;
        IF moved OR release_it THEN
            delay_ms := CASE WHEN nacked THEN q.retry_delay ELSE 0 END;
            UPDATE queen.consumer_state cs
               SET cursor_offset = cur,
                   retry_count = retries,
                   lease_id = CASE WHEN release_it THEN NULL ELSE cs.lease_id END,
                   lease_expires_at = CASE WHEN release_it THEN NULL ELSE cs.lease_expires_at END,
                   delivered_until = CASE WHEN release_it THEN NULL ELSE cs.delivered_until END,
                   not_before = CASE WHEN delay_ms > 0
                                     THEN now_at + make_interval(secs => delay_ms / 1000.0)
                                     ELSE NULL END,
                   head_at = queen.head_after(pid, cur)
             WHERE cs.ctid = st.row_at;
            IF NOT FOUND THEN RAISE EXCEPTION 'ack_batch: a state row moved under its lock'; END IF;
            IF release_it THEN
                freed_q := freed_q || q.name;
                freed_p := freed_p || st.pname;
            END IF;
        END IF;
    END LOOP;
    -- Tell the caller (and other brokers) that the partitions whose lease was released may
    -- be claimable: a `released` row each, after the items' rows.
    FOR k IN 1 .. coalesce(array_length(freed_q, 1), 0) LOOP
        item_no := NULL; success := NULL; error := NULL; queue_name := freed_q[k];
        partition_name := freed_p[k]; lease_released := NULL; dlq := NULL; released := true;
        RETURN NEXT;
        PERFORM pg_notify('queen_push', freed_q[k]);
    END LOOP;
END;
$$;
