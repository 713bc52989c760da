-- A new state row with something pending or a lease: queen.keep_consumer_index.
CREATE OR REPLACE TRIGGER consumer_index_added
    AFTER INSERT ON queen.consumer_state
    FOR EACH ROW WHEN (NEW.head_at IS NOT NULL OR NEW.lease_id IS NOT NULL)
    EXECUTE FUNCTION queen.keep_consumer_index();
