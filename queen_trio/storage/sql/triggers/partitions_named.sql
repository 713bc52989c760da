-- Every partition created is named in queen.partition_names: queen.name_partitions.
CREATE OR REPLACE TRIGGER partitions_named AFTER INSERT ON queen.partitions
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT
    EXECUTE FUNCTION queen.name_partitions();

-- Installed in one transaction with the other objects: the CREATE above holds off every
-- other insert into and delete from partitions until this commits, so the names below are
-- exactly the partitions that exist (created before migration 0013, or by a broker of an
-- older generation meanwhile).
DELETE FROM queen.partition_names n
 WHERE NOT EXISTS (SELECT 1 FROM queen.partitions p WHERE p.id = n.id);
INSERT INTO queen.partition_names (id, queue_id, name)
SELECT p.id, p.queue_id, p.name FROM queen.partitions p
 WHERE NOT EXISTS (SELECT 1 FROM queen.partition_names n WHERE n.id = p.id);
