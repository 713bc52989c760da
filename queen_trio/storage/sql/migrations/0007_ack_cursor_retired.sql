-- queen.ack_cursor is now the second half of queen.ack_batch (functions/ack_batch.sql). A
-- database whose object installer recorded it drops it with its file; one upgraded from 0017
-- holds it from the old migrations without a record in queen.schema_objects, so nothing
-- else would: it goes here, in both cases (the installer's DROP is IF EXISTS).
DROP FUNCTION IF EXISTS queen.ack_cursor(text[], uuid[], text[], text[], uuid[], text[]);
