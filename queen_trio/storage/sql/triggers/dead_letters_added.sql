-- queen.dead_letter_counts, on every insert of dead letters.
CREATE OR REPLACE TRIGGER dead_letters_added AFTER INSERT ON queen.dead_letters
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT
    EXECUTE FUNCTION queen.count_dead_letters_added();
