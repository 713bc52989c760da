-- The commit time of the message at `p_cursor`, or NULL when nothing is at or after it.
-- VOLATILE on purpose: called after the caller locked the state row, it must read the
-- partition as of now (a fresh snapshot), not as of the start of the calling statement.
CREATE OR REPLACE FUNCTION queen.head_after(p_partition uuid, p_cursor bigint) RETURNS timestamptz
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    found_at timestamptz;
BEGIN
    SELECT s.created_at INTO found_at
      FROM queen.segments s
     WHERE s.partition_id = p_partition AND s.first_offset <= p_cursor
       AND s.first_offset + s.message_count > p_cursor
     ORDER BY s.first_offset DESC LIMIT 1;
    IF found_at IS NULL THEN
        SELECT s.created_at INTO found_at
          FROM queen.segments s
         WHERE s.partition_id = p_partition AND s.first_offset > p_cursor
         ORDER BY s.first_offset LIMIT 1;
    END IF;
    RETURN found_at;
END;
$$;
