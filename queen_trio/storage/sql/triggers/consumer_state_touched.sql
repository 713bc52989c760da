-- The first lease a group takes on a partition marks it touched: queen.mark_touched.
CREATE OR REPLACE TRIGGER consumer_state_touched
    BEFORE UPDATE OF lease_id ON queen.consumer_state
    FOR EACH ROW WHEN (NEW.lease_id IS NOT NULL AND OLD.touched_at IS NULL)
    EXECUTE FUNCTION queen.mark_touched();
