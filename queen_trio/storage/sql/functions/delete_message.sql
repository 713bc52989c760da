-- DELETE /api/v1/messages/:partitionId/:transactionId: hide the message (see
-- queen.hidden_messages). Its dead letters go; a group whose cursor stands on it with no live
-- lease steps past it (an operator's move, not consumption) and starts the next message with
-- no failed deliveries and no retryDelay wait; an expired lease is left for the next claim to
-- judge. Returns nothing when there is no such message to hide, also when a concurrent delete
-- of it won the race.
CREATE OR REPLACE FUNCTION queen.delete_message(p_partition uuid, p_txid text)
RETURNS TABLE (message_offset bigint, queue_name text) LANGUAGE plpgsql AS $$
DECLARE
    off     bigint;
    low     bigint;
    part    record;
    nxt     bigint;
BEGIN
    SELECT p.next_offset, q.name INTO part
      FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
     WHERE p.id = p_partition;
    IF part IS NULL THEN
        RETURN;
    END IF;
    off := queen.message_offset(p_partition, p_txid, '__QUEUE_MODE__');
    low := coalesce((SELECT s.first_offset FROM queen.segments s
                      WHERE s.partition_id = p_partition ORDER BY s.first_offset LIMIT 1),
                    part.next_offset);
    IF off IS NULL OR off < low OR off >= part.next_offset
       OR EXISTS (SELECT 1 FROM queen.hidden_messages h
                   WHERE h.partition_id = p_partition AND h.message_offset = off) THEN
        RETURN;
    END IF;
    PERFORM 1 FROM queen.consumer_state cs WHERE cs.partition_id = p_partition
      ORDER BY cs.consumer_group FOR UPDATE;
    INSERT INTO queen.hidden_messages (partition_id, message_offset) VALUES (p_partition, off)
        ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        -- A concurrent delete hid it after the check above.
        RETURN;
    END IF;
    DELETE FROM queen.dead_letters d WHERE d.partition_id = p_partition AND d.message_offset = off;
    nxt := off + 1;
    WHILE EXISTS (SELECT 1 FROM queen.hidden_messages h
                   WHERE h.partition_id = p_partition AND h.message_offset = nxt) LOOP
        nxt := nxt + 1;
    END LOOP;
    PERFORM set_config('queen.seek', 'on', true);
    UPDATE queen.consumer_state cs
       SET cursor_offset = nxt, head_at = queen.head_after(p_partition, nxt),
           retry_count = 0, not_before = NULL
     WHERE cs.partition_id = p_partition AND cs.cursor_offset = off
       AND (cs.lease_id IS NULL OR cs.lease_expires_at <= clock_timestamp());
    PERFORM set_config('queen.seek', 'off', true);
    message_offset := off; queue_name := part.name;
    RETURN NEXT;
END;
$$;
