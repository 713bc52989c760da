-- A committed cycle's reply, by its key (docs/decisions.md#streams-replayed-cycles).
SELECT reply FROM queen.stream_cycles
 WHERE query_id = :query_id::uuid AND partition_id = :partition_id::uuid
   AND cycle_key = :cycle_key
