-- Empty every table of the broker's schema but the migrations' record: queues, partitions,
-- messages, groups, dead letters, traces (queen_trio.testing: reset() between tests). The
-- list is read from the catalog, so a table a later migration adds is emptied too.
DO $$
BEGIN
    EXECUTE (
        SELECT 'TRUNCATE ' || string_agg(format('%I.%I', schemaname, tablename), ', ')
               || ' RESTART IDENTITY'
          FROM pg_tables
         WHERE schemaname = 'queen' AND tablename <> 'schema_migrations');
END $$
