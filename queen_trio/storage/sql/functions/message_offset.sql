-- The offset a (partition, transaction id) addresses for a group: with dedupWindowSeconds 0
-- an id may repeat; then the oldest one at or after the group's cursor, else the newest.
CREATE OR REPLACE FUNCTION queen.message_offset(p_partition uuid, p_txid text, p_group text)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT t.message_offset FROM queen.transaction_index t
          WHERE t.partition_id = p_partition AND t.transaction_id = p_txid
            AND t.message_offset >= coalesce(
                (SELECT cs.cursor_offset FROM queen.consumer_state cs
                  WHERE cs.partition_id = p_partition AND cs.consumer_group = p_group), 0)
          ORDER BY t.message_offset LIMIT 1),
        (SELECT max(t.message_offset) FROM queen.transaction_index t
          WHERE t.partition_id = p_partition AND t.transaction_id = p_txid))
$$;
