WITH created AS (
    INSERT INTO queen.partitions (queue_id, name) VALUES (:queue_id, 'Default')
    ON CONFLICT (queue_id, name) DO NOTHING
    RETURNING id
)
SELECT id FROM created
UNION ALL
SELECT id FROM queen.partitions WHERE queue_id = :queue_id AND name = 'Default'
