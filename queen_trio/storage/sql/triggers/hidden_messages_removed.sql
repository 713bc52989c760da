-- queen.hidden_counts, when deleted messages go with their segment or partition.
CREATE OR REPLACE TRIGGER hidden_messages_removed AFTER DELETE ON queen.hidden_messages
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION queen.count_hidden();
