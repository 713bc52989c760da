-- Give back a pop's lease whose reply could not be sent (the consumer hung up): the
-- partitions are claimable again at once, and no failed delivery is counted (the retry
-- counter keeps what it had). Returns the queues whose partitions were released. The lease's
-- partitions are found in queen.consumer_leases, by key whatever its statistics say
-- (functions/keep_consumer_index says why).
CREATE OR REPLACE FUNCTION queen.release_lease(p_lease_id uuid)
RETURNS TABLE (queue_name text) LANGUAGE plpgsql SET enable_seqscan = off AS $$
BEGIN
    PERFORM 1 FROM queen.consumer_state cs
      JOIN queen.consumer_leases l
        ON cs.partition_id = l.partition_id AND cs.consumer_group = l.consumer_group
     WHERE l.lease_id = p_lease_id
     ORDER BY cs.partition_id, cs.consumer_group FOR UPDATE OF cs;
    FOR queue_name IN
        WITH released AS (
            UPDATE queen.consumer_state cs
               SET lease_id = NULL, lease_expires_at = NULL, delivered_until = NULL
              FROM queen.consumer_leases l
             WHERE l.lease_id = p_lease_id
               AND cs.partition_id = l.partition_id AND cs.consumer_group = l.consumer_group
               AND cs.lease_id = p_lease_id
            RETURNING cs.queue_id
        )
        SELECT DISTINCT q.name FROM released r JOIN queen.queues q ON q.id = r.queue_id
    LOOP
        -- Other brokers' long polls may claim them now.
        PERFORM pg_notify('queen_push', queue_name);
        RETURN NEXT;
    END LOOP;
END;
$$;
