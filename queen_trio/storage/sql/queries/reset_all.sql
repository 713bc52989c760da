-- Empty every table of the broker's schema but its ledgers (the migrations applied, the
-- functions, views and triggers installed): queues, partitions, messages, groups, dead
-- letters, traces (queen_trio.testing: reset() between tests). The list is read from the
-- catalog, so a table a later migration adds is emptied too.
DO $$
BEGIN
    EXECUTE (
        SELECT 'TRUNCATE ' || string_agg(format('%I.%I', schemaname, tablename), ', ')
               || ' RESTART IDENTITY'
          FROM pg_tables
         WHERE schemaname = 'queen'
           AND tablename NOT IN ('schema_migrations', 'schema_objects', 'schema_object_set'));
END $$
