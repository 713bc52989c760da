-- Copy the message at `p_offset` into the group's dead letters. Returns false when its
-- segment is gone (nothing to copy).
CREATE OR REPLACE FUNCTION queen.dead_letter(p_partition uuid, p_group text, p_offset bigint,
                                  p_error text, p_retry_count integer)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    seg   record;
    frame bytea;
    tx_len integer;
    trace_len integer;
BEGIN
    SELECT s.first_offset, s.created_at, s.frames, s.frame_ends, p.name AS partition_name,
           p.queue_id
      INTO seg
      FROM queen.segments s JOIN queen.partition_names p ON p.id = s.partition_id
     WHERE s.partition_id = p_partition AND s.first_offset <= p_offset
       AND s.first_offset + s.message_count > p_offset
     ORDER BY s.first_offset DESC LIMIT 1;
    IF seg IS NULL THEN
        RETURN false;
    END IF;
    frame := queen.frames_between(seg.frames, seg.frame_ends,
                                  (p_offset - seg.first_offset)::integer, 1);
    trace_len := CASE WHEN get_byte(frame, 16) & 2 = 2 THEN 16 ELSE 0 END;
    tx_len := get_byte(frame, 17) << 8 | get_byte(frame, 18);
    INSERT INTO queen.dead_letters (queue_id, partition_id, partition_name, consumer_group,
                                    message_offset, message_id, transaction_id, frame,
                                    message_created_at, error_message, retry_count)
    VALUES (seg.queue_id, p_partition, seg.partition_name, p_group, p_offset,
            encode(substring(frame FROM 1 FOR 16), 'hex')::uuid,
            convert_from(substring(frame FROM 26 + trace_len FOR tx_len), 'UTF8'),
            frame, seg.created_at, p_error, p_retry_count);
    RETURN true;
END;
$$;
