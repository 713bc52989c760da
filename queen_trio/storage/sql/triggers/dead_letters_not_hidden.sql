-- A deleted message never becomes a dead letter: queen.skip_hidden_dead_letter.
CREATE OR REPLACE TRIGGER dead_letters_not_hidden BEFORE INSERT ON queen.dead_letters
    FOR EACH ROW EXECUTE FUNCTION queen.skip_hidden_dead_letter();
