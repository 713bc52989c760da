-- A maintenance pass that must run (a test's, an operator's): wait for the one running.
SELECT pg_advisory_xact_lock(:lock_key)
