-- A namespace/task pop in one round trip (docs/decisions.md#namespace-and-task-pops): the queues whose namespace
-- and task match, higher priority first, then the one whose oldest pending message for the
-- group is oldest; each is claimed with what is left of the batch until the batch is used up.
-- With nothing claimed anywhere, one row per queue carries its next_check_at.
CREATE OR REPLACE FUNCTION queen.pop_namespace(
    p_namespace      text,
    p_task           text,
    p_group          text,
    p_batch          integer,
    p_max_partitions integer,
    p_lease_id       uuid,
    p_auto_ack       boolean,
    p_start_mode     text,
    p_start_from     timestamptz,
    -- The pop's stated conflation policy (NULL: none), stated to each queue it claims from.
    p_conflation     boolean DEFAULT NULL
) RETURNS TABLE (queue_name text, claim queen.claim_row) LANGUAGE plpgsql AS $$
DECLARE
    qn        text;
    c         queen.claim_row;
    remaining integer := greatest(p_batch, 1);
    got       integer;
    misses    queen.claim_row[] := ARRAY[]::queen.claim_row[];
    miss_q    text[] := ARRAY[]::text[];
    claimed   boolean := false;
    k         integer;
BEGIN
    FOR qn IN
        SELECT q.name FROM queen.queues q
         WHERE (p_namespace IS NULL OR q.namespace = p_namespace)
           AND (p_task IS NULL OR q.task = p_task)
         ORDER BY q.priority DESC,
                  -- From the group's claim floor (functions/pop_claim): no head_at is below
                  -- it, and below it lie the dead index entries a held xmin keeps.
                  (SELECT min(h.head_at) FROM queen.consumer_heads h
                    WHERE h.queue_id = q.id AND h.consumer_group = p_group
                      AND h.head_at >= coalesce(
                          (SELECT s.claim_floor FROM queen.subscriptions s
                            WHERE s.queue_id = q.id AND s.consumer_group = p_group),
                          '-infinity')) NULLS LAST,
                  q.name
    LOOP
        got := 0;
        FOR c IN SELECT * FROM queen.pop_claim(qn, NULL, p_group, remaining, p_max_partitions,
                                               p_lease_id, p_auto_ack, p_start_mode,
                                               p_start_from, p_conflation)
        LOOP
            IF c.partition_id IS NULL THEN
                misses := misses || c;
                miss_q := miss_q || qn;
            ELSE
                got := got + c.take_frames;
                claimed := true;
                queue_name := qn; claim := c;
                RETURN NEXT;
            END IF;
        END LOOP;
        remaining := remaining - got;
        EXIT WHEN remaining <= 0;
    END LOOP;
    IF NOT claimed THEN
        FOR k IN 1 .. coalesce(array_length(misses, 1), 0) LOOP
            queue_name := miss_q[k]; claim := misses[k];
            RETURN NEXT;
        END LOOP;
    END IF;
END;
$$;
