-- A streams cycle's first step: the (query, source partition) shard's advisory lock, held to
-- the end of the transaction; and the source partition's queue (the reply's queueName).
SELECT pg_advisory_xact_lock(hashtextextended(:query_id::text || ':' || :partition_id::text, 0)),
       (SELECT q.name FROM queen.partition_names p JOIN queen.queues q ON q.id = p.queue_id
         WHERE p.id = :partition_id::uuid) AS queue_name
