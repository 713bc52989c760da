-- Keeps a group with retried dead letters claimable: queen.keep_retries_claimable.
CREATE OR REPLACE TRIGGER consumer_state_retries_claimable
    BEFORE UPDATE OF head_at ON queen.consumer_state
    FOR EACH ROW WHEN (NEW.head_at IS NULL AND OLD.head_at IS NOT NULL)
    EXECUTE FUNCTION queen.keep_retries_claimable();
