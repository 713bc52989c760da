-- The queen schema's tables: size, live and dead rows (estimates), scans, vacuum.
SELECT t.relname AS name, t.n_live_tup AS rows, t.n_dead_tup AS dead_rows,
       pg_total_relation_size(t.relid) AS total_bytes, pg_relation_size(t.relid) AS table_bytes,
       pg_indexes_size(t.relid) AS index_bytes, t.seq_scan, t.idx_scan,
       t.last_autovacuum, t.last_autoanalyze
  FROM pg_stat_user_tables t
 WHERE t.schemaname = 'queen'
 ORDER BY pg_total_relation_size(t.relid) DESC, t.relname
