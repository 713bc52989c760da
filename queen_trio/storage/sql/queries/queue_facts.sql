-- What the push path needs to know about a queue before it packs a group.
SELECT encryption_enabled, dedup_window_seconds FROM queen.queues WHERE name = :queue
