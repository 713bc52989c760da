-- Create the queue if needed (namespace/task derived from a dotted name) and lock its row,
-- so that concurrent configure calls merge one after the other.
WITH created AS (
    INSERT INTO queen.queues (name, namespace, task)
    VALUES ($1, split_part($1, '.', 1), split_part($1, '.', 2))
    ON CONFLICT (name) DO NOTHING
    RETURNING id
)
SELECT id FROM created
UNION ALL
SELECT id FROM queen.queues WHERE name = $1
