-- What a group has consumed (consumer_state.consumed_total, last_consumed_at, and touched_at
-- the first time), kept on every forward cursor move (acks, autoAck, dead letters, eviction),
-- so no consumer path needs to know about it. A seek is an operator's rewind, not consumption: it sets queen.seek for its
-- transaction and is not counted (triggers/consumer_state_consumed).
CREATE OR REPLACE FUNCTION queen.count_consumption() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.consumed_total := OLD.consumed_total + (NEW.cursor_offset - OLD.cursor_offset);
    NEW.last_consumed_at := clock_timestamp();
    NEW.touched_at := coalesce(OLD.touched_at, NEW.last_consumed_at);
    RETURN NEW;
END;
$$;
