-- POST /api/v1/messages/:partitionId/:transactionId/retry: the groups' newest dead letter of
-- the message is delivered again by the group's next claim of the partition (pop_claim), and
-- its count of expired leases starts over. Groups without a position on the partition
-- (deleted since) are left out. Returns the groups whose dead letter will be delivered.
CREATE OR REPLACE FUNCTION queen.retry_dead_letter(p_partition uuid, p_txid text,
                                                   p_groups text[])
RETURNS TABLE (consumer_group text, queue_name text) LANGUAGE plpgsql AS $$
DECLARE
    d record;
BEGIN
    PERFORM 1 FROM queen.consumer_state cs
     WHERE cs.partition_id = p_partition AND cs.consumer_group = ANY (p_groups)
     ORDER BY cs.consumer_group FOR UPDATE;
    FOR d IN
        SELECT DISTINCT ON (dl.consumer_group) dl.id, dl.consumer_group, dl.message_created_at,
               q.name AS qname
          FROM queen.dead_letters dl
          JOIN queen.queues q ON q.id = dl.queue_id
          JOIN queen.consumer_state cs
            ON cs.partition_id = dl.partition_id AND cs.consumer_group = dl.consumer_group
         WHERE dl.partition_id = p_partition AND dl.transaction_id = p_txid
           AND dl.consumer_group = ANY (p_groups)
         ORDER BY dl.consumer_group, dl.failed_at DESC, dl.id DESC
    LOOP
        UPDATE queen.dead_letters dl
           SET retry_requested_at = clock_timestamp(), retry_lease_id = NULL, retry_expiries = 0
         WHERE dl.id = d.id;
        -- Claimable now, even if the group is caught up.
        UPDATE queen.consumer_state cs
           SET head_at = least(cs.head_at, d.message_created_at)
         WHERE cs.partition_id = p_partition AND cs.consumer_group = d.consumer_group;
        PERFORM pg_notify('queen_push', d.qname);
        consumer_group := d.consumer_group; queue_name := d.qname;
        RETURN NEXT;
    END LOOP;
END;
$$;
