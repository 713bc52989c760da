-- A cycle's state operations on one (query, source partition) shard, in array order: 'upsert'
-- writes the value (insert or overwrite), anything else deletes the key (a missing key is a
-- no-op). The caller holds the shard's advisory lock and validated the types. Returns how many
-- operations were applied.
CREATE OR REPLACE FUNCTION queen.stream_apply_state(
    p_query     uuid,
    p_partition uuid,
    p_types     text[],
    p_keys      text[],
    p_values    jsonb[]
) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    n integer := coalesce(array_length(p_types, 1), 0);
    i integer;
BEGIN
    FOR i IN 1 .. n LOOP
        IF p_types[i] = 'upsert' THEN
            INSERT INTO queen.stream_state AS s (query_id, partition_id, key, value, updated_at)
            VALUES (p_query, p_partition, p_keys[i], p_values[i], clock_timestamp())
            ON CONFLICT (query_id, partition_id, key)
            DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at;
        ELSE
            DELETE FROM queen.stream_state s
             WHERE s.query_id = p_query AND s.partition_id = p_partition AND s.key = p_keys[i];
        END IF;
    END LOOP;
    RETURN n;
END;
$$;
