-- Whoever dead-letters (a claim, an ack, eviction, an undecodable frame), a deleted message
-- never becomes a dead letter.
CREATE OR REPLACE FUNCTION queen.skip_hidden_dead_letter() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM queen.hidden_messages h
                WHERE h.partition_id = NEW.partition_id
                  AND h.message_offset = NEW.message_offset) THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END;
$$;
