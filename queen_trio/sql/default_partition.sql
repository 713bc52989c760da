WITH created AS (
    INSERT INTO queen.partitions (queue_id, name) VALUES ($1, 'Default')
    ON CONFLICT (queue_id, name) DO NOTHING
    RETURNING id
)
SELECT id FROM created
UNION ALL
SELECT id FROM queen.partitions WHERE queue_id = $1 AND name = 'Default'
