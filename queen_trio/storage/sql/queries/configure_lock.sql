-- Create the queue if needed (namespace/task derived from a dotted name) and lock its row,
-- so that concurrent configure calls merge one after the other.
WITH created AS (
    INSERT INTO queen.queues (name, namespace, task)
    VALUES (:queue, split_part(:queue, '.', 1), split_part(:queue, '.', 2))
    ON CONFLICT (name) DO NOTHING
    RETURNING id
)
SELECT id FROM created
UNION ALL
SELECT id FROM queen.queues WHERE name = :queue
