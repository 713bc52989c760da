-- POST /api/v1/configure: the effective options, one column each (queen_trio.queues.options).
UPDATE queen.queues
   SET namespace = :namespace, task = :task, explicit_options = :explicit_options::jsonb,
       configured = true,
       priority = :priority, lease_time = :lease_time, retry_limit = :retry_limit,
       retry_delay = :retry_delay, max_size = :max_size, ttl = :ttl,
       dead_letter_queue = :dead_letter_queue, dlq_after_max_retries = :dlq_after_max_retries,
       delayed_processing = :delayed_processing, window_buffer = :window_buffer,
       retention_seconds = :retention_seconds,
       completed_retention_seconds = :completed_retention_seconds,
       retention_enabled = :retention_enabled, encryption_enabled = :encryption_enabled,
       max_wait_time_seconds = :max_wait_time_seconds,
       dedup_window_seconds = :dedup_window_seconds, updated_at = clock_timestamp()
 WHERE id = :queue_id
