-- The fire's delete (queries/timers_take) and a failed fire's backoff (queries/timers_backoff)
-- find a claim's rows by its token. Without an index each was a scan of every pending timer
-- (950 ms beside 100,000 timers due an hour later, at every fire: docs/performance.md#timers).
-- Partial: only the rows a broker holds right now carry a token.
CREATE INDEX timers_claimed ON queen.timers (claim_token) WHERE claim_token IS NOT NULL;
