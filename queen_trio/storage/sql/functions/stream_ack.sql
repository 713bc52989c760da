-- A cycle's source ack (POST /streams/v1/cycle): under the (partition, group) row's lock, the
-- lease is checked again (a non-NULL p_lease must be the live lease), the message is found at
-- or after the cursor (the cursor never moves backwards) and within the leased delivery, and
-- the cursor moves past it. 'completed' releases the lease when p_release (else the lease
-- runs on: the gate's partial allow); 'failed'/'dlq' dead-letters that one message and
-- releases. One row: ok, the error (the reference's texts), the queue's name, and whether
-- the lease was released (long polls of the queue should look again).
CREATE OR REPLACE FUNCTION queen.stream_ack(
    p_partition uuid,
    p_group     text,
    p_txid      text,
    p_lease     uuid,
    p_status    text,
    p_release   boolean,
    p_error     text
) RETURNS TABLE (ok boolean, error text, queue_name text, released boolean)
LANGUAGE plpgsql AS $$
DECLARE
    st       record;
    now_at   timestamptz := clock_timestamp();
    live     boolean;
    off      bigint;
    cur      bigint;
    release_it boolean;
BEGIN
    ok := false; error := NULL; released := false;
    SELECT q.name INTO queue_name
      FROM queen.partition_names p JOIN queen.queues q ON q.id = p.queue_id WHERE p.id = p_partition;
    SELECT cs.* INTO st FROM queen.consumer_state cs
     WHERE cs.partition_id = p_partition AND cs.consumer_group = p_group
       FOR UPDATE;
    IF st.partition_id IS NULL THEN
        error := CASE WHEN queue_name IS NULL THEN 'Message not found'
                      ELSE 'Message was not delivered to consumer group ' || p_group END;
        RETURN NEXT;
        RETURN;
    END IF;
    live := st.lease_id IS NOT NULL AND st.lease_expires_at > now_at;
    IF p_lease IS NOT NULL AND (NOT live OR st.lease_id IS DISTINCT FROM p_lease) THEN
        error := 'Invalid or expired lease';
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT t.message_offset INTO off FROM queen.transaction_index t
     WHERE t.partition_id = p_partition AND t.transaction_id = p_txid
       AND t.message_offset >= st.cursor_offset
     ORDER BY t.message_offset LIMIT 1;
    IF off IS NULL THEN
        error := CASE WHEN EXISTS (SELECT 1 FROM queen.transaction_index t
                                    WHERE t.partition_id = p_partition
                                      AND t.transaction_id = p_txid)
                      THEN 'Message already settled for this consumer group (the cursor '
                           'never moves backwards)'
                      ELSE 'Message not found' END;
        RETURN NEXT;
        RETURN;
    END IF;
    IF live AND p_lease IS NOT NULL AND off >= st.delivered_until THEN
        error := 'Message was not delivered under the current lease';
        RETURN NEXT;
        RETURN;
    END IF;
    cur := off + 1;
    IF p_status IN ('failed', 'dlq') THEN
        PERFORM queen.dead_letter(p_partition, p_group, off,
                                  coalesce(nullif(p_error, ''), 'Streaming cycle reported failure'),
                                  st.retry_count);
        release_it := true;
    ELSE
        release_it := p_release OR NOT live;
    END IF;
    UPDATE queen.consumer_state cs
       SET cursor_offset = cur,
           retry_count = 0,
           not_before = NULL,
           lease_id = CASE WHEN release_it THEN NULL ELSE cs.lease_id END,
           lease_expires_at = CASE WHEN release_it THEN NULL ELSE cs.lease_expires_at END,
           delivered_until = CASE WHEN release_it THEN NULL ELSE cs.delivered_until END,
           head_at = queen.head_after(p_partition, cur)
     WHERE cs.partition_id = p_partition AND cs.consumer_group = p_group;
    ok := true;
    released := release_it AND live;
    IF released THEN
        PERFORM pg_notify('queen_push', queue_name);
    END IF;
    RETURN NEXT;
END;
$$;
