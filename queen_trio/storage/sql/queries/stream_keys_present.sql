-- How many of these keys a state shard holds.
SELECT count(*) FROM queen.stream_state
 WHERE query_id = :query_id::uuid AND partition_id = :partition_id::uuid
   AND key = ANY(:keys::text[])
