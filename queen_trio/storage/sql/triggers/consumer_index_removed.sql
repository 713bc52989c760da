-- A state row gone (its partition or its group deleted): queen.keep_consumer_index.
CREATE OR REPLACE TRIGGER consumer_index_removed
    AFTER DELETE ON queen.consumer_state
    FOR EACH ROW WHEN (OLD.head_at IS NOT NULL OR OLD.lease_id IS NOT NULL)
    EXECUTE FUNCTION queen.keep_consumer_index();
