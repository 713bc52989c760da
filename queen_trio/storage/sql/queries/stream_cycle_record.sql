-- Record a committed cycle's reply under its key (a replay is answered with it), mark the
-- source group a streams group (its lease expiries are not failed deliveries), and prune
-- this query's cycles older than an hour.
WITH recorded AS (
    INSERT INTO queen.stream_cycles (query_id, partition_id, cycle_key, reply)
    SELECT :query_id::uuid, :partition_id::uuid, :cycle_key, :reply::jsonb
     WHERE :cycle_key::text IS NOT NULL
    ON CONFLICT (query_id, partition_id, cycle_key) DO UPDATE
        SET reply = EXCLUDED.reply, created_at = clock_timestamp()
    RETURNING 1
), grouped AS (
    INSERT INTO queen.stream_groups (queue_name, consumer_group, query_id)
    SELECT :queue_name, :consumer_group, :query_id::uuid
     WHERE :queue_name::text IS NOT NULL AND :consumer_group::text IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING 1
)
DELETE FROM queen.stream_cycles
 WHERE query_id = :query_id::uuid AND created_at < clock_timestamp() - interval '1 hour'
