-- Trace events, recorded by consumers (POST /api/v1/traces) against a message, to follow a
-- flow message by message. Deleted with their partition.
CREATE TABLE queen.trace_events (
    id             uuid PRIMARY KEY,
    partition_id   uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    transaction_id text NOT NULL,
    message_offset bigint NOT NULL,
    consumer_group text NOT NULL,
    event_type     text NOT NULL,
    data           text NOT NULL,   -- the JSON text as received
    worker_id      text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX trace_events_message ON queen.trace_events (partition_id, transaction_id, created_at);

CREATE TABLE queen.trace_names (
    event_id   uuid NOT NULL REFERENCES queen.trace_events (id) ON DELETE CASCADE,
    trace_name text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (trace_name, event_id)
);
CREATE INDEX trace_names_recent ON queen.trace_names (trace_name, created_at);

-- The offset a (partition, transaction id) addresses for a group: with dedupWindowSeconds 0
-- an id may repeat; then the oldest one at or after the group's cursor, else the newest.
CREATE FUNCTION queen.message_offset(p_partition uuid, p_txid text, p_group text)
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
