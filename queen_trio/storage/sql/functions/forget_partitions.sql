-- Partitions were deleted (a queue's delete cascading to them, or the reclaim): their
-- segments, transaction index rows and names go with them, which no foreign key does
-- (migrations 0012 and 0013). Once per statement, for every partition it deleted.
CREATE OR REPLACE FUNCTION queen.forget_partitions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM queen.segments s USING removed r WHERE s.partition_id = r.id;
    DELETE FROM queen.transaction_index t USING removed r WHERE t.partition_id = r.id;
    DELETE FROM queen.partition_names n USING removed r WHERE n.id = r.id;
    RETURN NULL;
END;
$$;
