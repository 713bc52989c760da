-- Migrations: one broker at a time, whoever starts first.
SELECT pg_advisory_lock(:lock_key)
