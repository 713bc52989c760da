-- Register a streams query by name (POST /streams/v1/queries). A new name is inserted (fresh);
-- the same config hash keeps the id and the state; another hash is a conflict, unless
-- p_reset, which wipes the query's state and its cycle ledger and stores the new hash. The
-- insert settles concurrent first registrations: the unique name lets one in, the others
-- wait for its commit and then compare their hash with its own (one fresh, the rest a
-- conflict or the same query). The query's default source group (streams.<name>) is
-- recorded as a streams group (queen.stream_groups).
CREATE OR REPLACE FUNCTION queen.stream_register(
    p_id     uuid,
    p_name   text,
    p_source text,
    p_sink   text,
    p_hash   text,
    p_reset  boolean
) RETURNS TABLE (query_id uuid, config_hash text, fresh boolean, did_reset boolean,
                 conflict boolean)
LANGUAGE plpgsql AS $$
DECLARE
    existing record;
    attempt  integer := 0;
BEGIN
    LOOP
        attempt := attempt + 1;
        INSERT INTO queen.stream_queries (id, name, source_queue, sink_queue, config_hash)
        VALUES (p_id, p_name, p_source, p_sink, p_hash)
        ON CONFLICT (name) DO NOTHING;
        IF FOUND THEN
            query_id := p_id; config_hash := p_hash; fresh := true; did_reset := false;
            conflict := false;
            EXIT;
        END IF;
        SELECT q.id, q.config_hash INTO existing
          FROM queen.stream_queries q WHERE q.name = p_name FOR UPDATE;
        IF existing.id IS NULL THEN
            -- Deleted between the two statements: try the insert again.
            IF attempt >= 5 THEN
                RAISE EXCEPTION 'stream_register: the query % keeps disappearing', p_name;
            END IF;
            CONTINUE;
        END IF;
        query_id := existing.id; fresh := false; did_reset := false; conflict := false;
        IF existing.config_hash = p_hash THEN
            UPDATE queen.stream_queries q
               SET source_queue = p_source, sink_queue = p_sink, updated_at = clock_timestamp()
             WHERE q.id = existing.id;
            config_hash := p_hash;
        ELSIF p_reset THEN
            DELETE FROM queen.stream_state s WHERE s.query_id = existing.id;
            DELETE FROM queen.stream_cycles c WHERE c.query_id = existing.id;
            UPDATE queen.stream_queries q
               SET source_queue = p_source, sink_queue = p_sink, config_hash = p_hash,
                   updated_at = clock_timestamp()
             WHERE q.id = existing.id;
            config_hash := p_hash; did_reset := true;
        ELSE
            config_hash := existing.config_hash; conflict := true;
        END IF;
        EXIT;
    END LOOP;
    IF NOT conflict THEN
        INSERT INTO queen.stream_groups (queue_name, consumer_group, query_id)
        VALUES (p_source, 'streams.' || p_name, query_id)
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NEXT;
END;
$$;
