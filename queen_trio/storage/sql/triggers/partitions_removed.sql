-- Deleted partitions take their segments and transaction index rows with them:
-- queen.forget_partitions.
CREATE OR REPLACE TRIGGER partitions_removed AFTER DELETE ON queen.partitions
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT
    EXECUTE FUNCTION queen.forget_partitions();

-- Installed in one transaction with the other objects, after migration 0012 dropped the
-- foreign key: a partition another broker deleted in between left its segments behind.
-- The CREATE above holds off every other delete of partitions until this commits.
DELETE FROM queen.segments s
 WHERE NOT EXISTS (SELECT 1 FROM queen.partitions p WHERE p.id = s.partition_id);
