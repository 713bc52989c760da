-- A group that takes a lease on a partition has touched it (consumer_state.touched_at; the
-- cursor's moves are counted by queen.count_consumption): triggers/consumer_state_touched.
CREATE OR REPLACE FUNCTION queen.mark_touched() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.touched_at := clock_timestamp();
    RETURN NEW;
END;
$$;
