-- Maintenance runs on one broker at a time: a transaction-scoped advisory lock, never waited on.
SELECT pg_try_advisory_xact_lock(:lock_key)
