-- A cycle's state operations, in order (queen.stream_apply_state).
SELECT queen.stream_apply_state(:query_id::uuid, :partition_id::uuid, :types::text[],
                                :keys::text[], :vals::jsonb[])
