-- A state row's head_at or lease_id changed: queen.keep_consumer_index. Not `UPDATE OF`:
-- that would miss a change a BEFORE trigger makes (queen.keep_retries_claimable).
CREATE OR REPLACE TRIGGER consumer_index_moved
    AFTER UPDATE ON queen.consumer_state
    FOR EACH ROW WHEN (NEW.head_at IS DISTINCT FROM OLD.head_at
                       OR NEW.lease_id IS DISTINCT FROM OLD.lease_id)
    EXECUTE FUNCTION queen.keep_consumer_index();

-- Installed in one transaction with the other objects, which holds the table's lock from the
-- CREATE above until it commits: the two tables are brought up to date with every row here
-- (empty after migration 0011; rows a writer changed between that migration and this
-- install are mirrored too), and from then on this trigger keeps them.
DELETE FROM queen.consumer_heads h
 WHERE NOT EXISTS (SELECT 1 FROM queen.consumer_state cs
                    WHERE cs.partition_id = h.partition_id
                      AND cs.consumer_group = h.consumer_group AND cs.head_at = h.head_at);
INSERT INTO queen.consumer_heads (queue_id, consumer_group, head_at, partition_id)
SELECT cs.queue_id, cs.consumer_group, cs.head_at, cs.partition_id
  FROM queen.consumer_state cs WHERE cs.head_at IS NOT NULL
    ON CONFLICT DO NOTHING;
DELETE FROM queen.consumer_leases l
 WHERE NOT EXISTS (SELECT 1 FROM queen.consumer_state cs
                    WHERE cs.partition_id = l.partition_id
                      AND cs.consumer_group = l.consumer_group AND cs.lease_id = l.lease_id);
INSERT INTO queen.consumer_leases (lease_id, partition_id, consumer_group)
SELECT cs.lease_id, cs.partition_id, cs.consumer_group
  FROM queen.consumer_state cs WHERE cs.lease_id IS NOT NULL
    ON CONFLICT DO NOTHING;
