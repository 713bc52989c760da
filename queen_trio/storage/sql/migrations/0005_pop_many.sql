-- Several pops in one call (the pop lane): each request is claimed in turn, in one
-- transaction, so one bridge crossing and one round trip serve them all. Rows leased by an
-- earlier request of the call are not claimable by a later one (their lease is live), and an
-- autoAck request's cursor move is seen by the next. The lane only fuses pops of groups that
-- already joined their queue, so no request here waits on a queue row lock while earlier ones
-- hold state rows.
CREATE FUNCTION queen.pop_many(
    p_queues         text[],
    p_partitions     text[],
    p_groups         text[],
    p_batches        integer[],
    p_max_partitions integer[],
    p_lease_ids      uuid[],
    p_auto_acks      boolean[],
    p_start_modes    text[],
    p_start_froms    timestamptz[]
) RETURNS TABLE (
    request_no     integer,
    partition_id   uuid,
    partition_name text,
    first_offset   bigint,
    created_at     timestamptz,
    frames         bytea,
    skip_frames    integer,
    take_frames    integer,
    next_check_at  timestamptz
) LANGUAGE plpgsql AS $$
DECLARE
    i integer;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_queues, 1), 0) LOOP
        RETURN QUERY
            SELECT i, c.partition_id, c.partition_name, c.first_offset, c.created_at, c.frames,
                   c.skip_frames, c.take_frames, c.next_check_at
              FROM queen.pop_claim(p_queues[i], p_partitions[i], p_groups[i], p_batches[i],
                                   p_max_partitions[i], p_lease_ids[i], p_auto_acks[i],
                                   p_start_modes[i], p_start_froms[i]) c;
    END LOOP;
END;
$$;
