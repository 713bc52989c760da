-- The ephemeral owner's lock, held by the session for as long as it lives.
SELECT pg_try_advisory_lock(:lock_key)
