-- A state row's head_at, lease (its id or its expiry) or retryDelay changed:
-- queen.keep_consumer_index. Not `UPDATE OF`: that would miss a change a BEFORE trigger
-- makes (queen.keep_retries_claimable).
CREATE OR REPLACE TRIGGER consumer_index_moved
    AFTER UPDATE ON queen.consumer_state
    FOR EACH ROW WHEN (NEW.head_at IS DISTINCT FROM OLD.head_at
                       OR NEW.lease_id IS DISTINCT FROM OLD.lease_id
                       OR NEW.lease_expires_at IS DISTINCT FROM OLD.lease_expires_at
                       OR NEW.not_before IS DISTINCT FROM OLD.not_before)
    EXECUTE FUNCTION queen.keep_consumer_index();

-- Installed in one transaction with the other objects, which holds the table's lock from the
-- CREATE above until it commits: the two tables are built again from the state rows (empty
-- after migration 0011; rows a writer changed between that migration and this install are
-- in them too), and from then on this trigger keeps them.
DELETE FROM queen.consumer_heads;
INSERT INTO queen.consumer_heads (queue_id, consumer_group, head_at, partition_id, not_until)
SELECT cs.queue_id, cs.consumer_group, cs.head_at, cs.partition_id,
       greatest(cs.lease_expires_at, cs.not_before)
  FROM queen.consumer_state cs WHERE cs.head_at IS NOT NULL;
DELETE FROM queen.consumer_leases;
INSERT INTO queen.consumer_leases (lease_id, partition_id, consumer_group)
SELECT cs.lease_id, cs.partition_id, cs.consumer_group
  FROM queen.consumer_state cs WHERE cs.lease_id IS NOT NULL;
