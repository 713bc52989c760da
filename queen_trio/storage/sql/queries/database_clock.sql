-- The server's clock: what `since` is measured against in the queries of a test's report.
SELECT clock_timestamp()
