-- POST /api/v1/ephemeral/configure: the declaration, stored before it is applied.
INSERT INTO queen.ephemeral_queues (queue, options) VALUES (:queue, :options::jsonb)
ON CONFLICT (queue) DO UPDATE SET options = excluded.options, updated_at = now()
