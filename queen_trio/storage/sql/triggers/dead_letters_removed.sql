-- queen.dead_letter_counts, on every delete of dead letters.
CREATE OR REPLACE TRIGGER dead_letters_removed AFTER DELETE ON queen.dead_letters
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT
    EXECUTE FUNCTION queen.count_dead_letters_removed();
