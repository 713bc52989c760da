-- The commit time of the message at `p_cursor`, or NULL when nothing is at or after it.
-- VOLATILE on purpose: called after the caller locked the state row, it must read the
-- partition as of now (a fresh snapshot), not as of the start of the calling statement.
CREATE OR REPLACE FUNCTION queen.head_after(p_partition uuid, p_cursor bigint) RETURNS timestamptz
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    found_at timestamptz;
    holds    boolean;
BEGIN
    -- The last segment starting at or before the cursor, then whether it reaches it: with
    -- "reaches the cursor" in the scan's filter, a cursor past every segment (a group that
    -- caught up, at every such ack) read every segment the partition keeps, newest first.
    SELECT s.created_at, s.first_offset + s.message_count > p_cursor INTO found_at, holds
      FROM queen.segments s
     WHERE s.partition_id = p_partition AND s.first_offset <= p_cursor
     ORDER BY s.first_offset DESC LIMIT 1;
    IF holds IS NOT TRUE THEN
        SELECT s.created_at INTO found_at
          FROM queen.segments s
         WHERE s.partition_id = p_partition AND s.first_offset > p_cursor
         ORDER BY s.first_offset LIMIT 1;
    END IF;
    RETURN found_at;
END;
$$;
