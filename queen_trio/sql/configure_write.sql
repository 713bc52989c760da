-- Column order matches queen_trio.options.FIELDS ($5 onwards); a test checks it.
UPDATE queen.queues
   SET namespace = $2, task = $3, explicit_options = $4::jsonb, configured = true,
       priority = $5, lease_time = $6, retry_limit = $7, retry_delay = $8, max_size = $9,
       ttl = $10, dead_letter_queue = $11, dlq_after_max_retries = $12,
       delayed_processing = $13, window_buffer = $14, retention_seconds = $15,
       completed_retention_seconds = $16, retention_enabled = $17, encryption_enabled = $18,
       max_wait_time_seconds = $19, dedup_window_seconds = $20, updated_at = clock_timestamp()
 WHERE id = $1
