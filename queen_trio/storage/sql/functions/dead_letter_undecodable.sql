-- Dead-letter, for one pop's group, the claimed messages the broker could not decode. With a
-- lease (p_lease_id), p_cut_* move each partition's cursor past the undecodable messages at its
-- head and cut its delivery short before the next one (p_untils; a cut to nothing releases the
-- lease): a partition whose lease is no longer this pop's is left alone. Without a lease
-- (autoAck) the cursor is already past them and only the dead letters are written. Each dead
-- letter keeps the stored frame (ciphertext included), so the right key makes it readable
-- again. p_txids may hold NULL where the frame's header could not be read: the transaction
-- index then names it. Returns the dead letters written.
CREATE OR REPLACE FUNCTION queen.dead_letter_undecodable(
    p_group          text,
    p_lease_id       uuid,
    p_cut_partitions uuid[],
    p_cursors        bigint[],
    p_untils         bigint[],
    p_partitions     uuid[],
    p_offsets        bigint[],
    p_message_ids    uuid[],
    p_txids          text[],
    p_errors         text[]
) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    k       integer;
    st      record;
    owned   uuid[] := ARRAY[]::uuid[];
    written integer;
BEGIN
    IF p_lease_id IS NOT NULL THEN
        -- State rows in partition id order, the lock order of every other writer.
        FOR k IN SELECT u.ord::integer FROM unnest(p_cut_partitions) WITH ORDINALITY AS u(p, ord)
                  ORDER BY u.p LOOP
            SELECT cs.cursor_offset, cs.lease_id, cs.retry_count INTO st
              FROM queen.consumer_state cs
             WHERE cs.partition_id = p_cut_partitions[k] AND cs.consumer_group = p_group
               FOR UPDATE;
            CONTINUE WHEN st IS NULL OR st.lease_id IS DISTINCT FROM p_lease_id;
            owned := owned || p_cut_partitions[k];
            UPDATE queen.consumer_state cs
               SET cursor_offset = p_cursors[k],
                   retry_count = CASE WHEN p_cursors[k] > st.cursor_offset THEN 0
                                      ELSE st.retry_count END,
                   lease_id = CASE WHEN p_untils[k] > p_cursors[k] THEN cs.lease_id END,
                   lease_expires_at = CASE WHEN p_untils[k] > p_cursors[k]
                                           THEN cs.lease_expires_at END,
                   delivered_until = CASE WHEN p_untils[k] > p_cursors[k] THEN p_untils[k] END,
                   head_at = CASE WHEN p_cursors[k] > st.cursor_offset
                                  THEN queen.head_after(p_cut_partitions[k], p_cursors[k])
                                  ELSE cs.head_at END
             WHERE cs.partition_id = p_cut_partitions[k] AND cs.consumer_group = p_group;
        END LOOP;
    END IF;

    INSERT INTO queen.dead_letters (queue_id, partition_id, partition_name, consumer_group,
                                    message_offset, message_id, transaction_id, frame,
                                    message_created_at, error_message, retry_count)
    SELECT p.queue_id, u.pid, p.name, p_group, u.off, u.mid,
           coalesce(u.txid, (SELECT t.transaction_id FROM queen.transaction_index t
                              WHERE t.partition_id = u.pid AND t.message_offset = u.off
                              LIMIT 1), ''),
           queen.frames_between(seg.frames, seg.frame_ends, (u.off - seg.first_offset)::integer,
                                1),
           seg.created_at, u.err, 0
      FROM unnest(p_partitions, p_offsets, p_message_ids, p_txids, p_errors)
           AS u(pid, off, mid, txid, err)
      JOIN queen.partition_names p ON p.id = u.pid
      JOIN LATERAL (
            SELECT s.first_offset, s.message_count, s.created_at, s.frames, s.frame_ends
              FROM queen.segments s
             WHERE s.partition_id = u.pid AND s.first_offset <= u.off
             ORDER BY s.first_offset DESC LIMIT 1) seg
        ON seg.first_offset + seg.message_count > u.off
     WHERE p_lease_id IS NULL OR u.pid = ANY (owned);
    GET DIAGNOSTICS written = ROW_COUNT;
    RETURN written;
END;
$$;
