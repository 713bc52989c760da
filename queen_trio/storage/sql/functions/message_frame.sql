-- The stored frame of one message, by its partition and offset (NULL once retention removed
-- its segment): what the trace reads and a test's report show of a message.
CREATE OR REPLACE FUNCTION queen.message_frame(p_partition uuid, p_offset bigint)
RETURNS bytea LANGUAGE sql STABLE AS $$
    SELECT queen.frames_between(s.frames, s.frame_ends, (p_offset - s.first_offset)::integer, 1)
      FROM queen.segments s
     WHERE s.partition_id = p_partition AND s.first_offset <= p_offset
       AND s.first_offset + s.message_count > p_offset
     ORDER BY s.first_offset DESC
     LIMIT 1
$$;
