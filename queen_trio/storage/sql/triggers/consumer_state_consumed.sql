-- Counts what a group consumed: queen.count_consumption.
CREATE OR REPLACE TRIGGER consumer_state_consumed
    BEFORE UPDATE OF cursor_offset ON queen.consumer_state
    FOR EACH ROW
    WHEN (NEW.cursor_offset > OLD.cursor_offset
          AND current_setting('queen.seek', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION queen.count_consumption();
