-- Partitions were created: their queue and name go into queen.partition_names (migration
-- 0013), once per statement, for every partition it inserted.
CREATE OR REPLACE FUNCTION queen.name_partitions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO queen.partition_names (id, queue_id, name)
    SELECT a.id, a.queue_id, a.name FROM added a;
    RETURN NULL;
END;
$$;
