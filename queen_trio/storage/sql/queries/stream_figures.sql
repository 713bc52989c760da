-- Streams figures for /metrics: queries, state rows and bytes.
SELECT (SELECT count(*) FROM queen.stream_queries) AS queries,
       count(*) AS state_rows,
       coalesce(sum(pg_column_size(value) + octet_length(key)), 0) AS state_bytes
  FROM queen.stream_state
