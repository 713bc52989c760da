-- Several pops in one call (the pop fusion): each request is claimed in turn, in one
-- transaction, so one bridge crossing and one round trip serve them all.
CREATE OR REPLACE FUNCTION queen.pop_many(
    p_queues         text[],
    p_partitions     text[],
    p_groups         text[],
    p_batches        integer[],
    p_max_partitions integer[],
    p_lease_ids      uuid[],
    p_auto_acks      boolean[],
    p_start_modes    text[],
    p_start_froms    timestamptz[],
    -- Each request's stated conflation policy (NULL: none stated).
    p_conflations    boolean[] DEFAULT NULL
) RETURNS TABLE (request_no integer, claim queen.claim_row) LANGUAGE plpgsql AS $$
DECLARE
    i integer;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_queues, 1), 0) LOOP
        RETURN QUERY
            SELECT i, c
              FROM queen.pop_claim(p_queues[i], p_partitions[i], p_groups[i], p_batches[i],
                                   p_max_partitions[i], p_lease_ids[i], p_auto_acks[i],
                                   p_start_modes[i], p_start_froms[i],
                                   p_conflations[i]) c;
    END LOOP;
END;
$$;
