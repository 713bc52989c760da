-- DELETE /api/v1/ephemeral/queue/:queue: the declaration goes after the rings.
DELETE FROM queen.ephemeral_queues WHERE queue = :queue RETURNING queue
