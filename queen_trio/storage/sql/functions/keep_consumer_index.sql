-- A state row's head_at, lease or retryDelay changed (or the row came or went): its entries
-- in queen.consumer_heads (what the claim scans, oldest pending first, with the time before
-- which the row is not claimable) and queen.consumer_leases (a lease's partitions) follow, in
-- the writer's transaction and under its row lock, so they always say what the rows say
-- (migration 0011). Fired by the triggers consumer_index_added, consumer_index_moved and
-- consumer_index_removed.
--
-- enable_seqscan is off inside it: both tables hold few live rows and, under a held xmin
-- horizon, many dead ones. Their indexes' statistics then count the live rows while their
-- pages hold every entry, so the planner prices one key's lookup at a share of the whole
-- index and scans the table instead: every dead row a hold keeps, at every lease's end
-- (0.5 ms per ack five minutes into a hold; docs/performance.md, "A lease's end read every
-- dead lease"). A lookup by key is the only plan either table needs here.
CREATE OR REPLACE FUNCTION queen.keep_consumer_index() RETURNS trigger LANGUAGE plpgsql
SET enable_seqscan = off AS $$
DECLARE
    moved boolean := TG_OP <> 'UPDATE' OR NEW.head_at IS DISTINCT FROM OLD.head_at;
BEGIN
    IF TG_OP <> 'INSERT' THEN
        IF OLD.head_at IS NOT NULL AND moved THEN
            DELETE FROM queen.consumer_heads h
             WHERE h.queue_id = OLD.queue_id AND h.consumer_group = OLD.consumer_group
               AND h.head_at = OLD.head_at AND h.partition_id = OLD.partition_id;
        END IF;
        IF OLD.lease_id IS NOT NULL
           AND (TG_OP = 'DELETE' OR NEW.lease_id IS DISTINCT FROM OLD.lease_id) THEN
            DELETE FROM queen.consumer_leases l
             WHERE l.lease_id = OLD.lease_id AND l.partition_id = OLD.partition_id
               AND l.consumer_group = OLD.consumer_group;
        END IF;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        IF NEW.head_at IS NOT NULL AND moved THEN
            INSERT INTO queen.consumer_heads (queue_id, consumer_group, head_at, partition_id,
                                              not_until)
            VALUES (NEW.queue_id, NEW.consumer_group, NEW.head_at, NEW.partition_id,
                    greatest(NEW.lease_expires_at, NEW.not_before));
        ELSIF NEW.head_at IS NOT NULL THEN
            -- The same head, leased, released or delayed: a HOT update of its row.
            UPDATE queen.consumer_heads h
               SET not_until = greatest(NEW.lease_expires_at, NEW.not_before)
             WHERE h.queue_id = NEW.queue_id AND h.consumer_group = NEW.consumer_group
               AND h.head_at = NEW.head_at AND h.partition_id = NEW.partition_id;
        END IF;
        IF NEW.lease_id IS NOT NULL
           AND (TG_OP = 'INSERT' OR NEW.lease_id IS DISTINCT FROM OLD.lease_id) THEN
            INSERT INTO queen.consumer_leases (lease_id, partition_id, consumer_group)
            VALUES (NEW.lease_id, NEW.partition_id, NEW.consumer_group);
        END IF;
    END IF;
    RETURN NULL;
END;
$$;
