-- queen.hidden_counts, on every message delete.
CREATE OR REPLACE TRIGGER hidden_messages_added AFTER INSERT ON queen.hidden_messages
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION queen.count_hidden();
