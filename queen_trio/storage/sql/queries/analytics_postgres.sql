-- GET /api/v1/analytics/postgres-stats: the database as PostgreSQL sees it.
SELECT current_database() AS name, pg_database_size(current_database()) AS size_bytes,
       d.numbackends, d.xact_commit, d.xact_rollback, d.blks_read, d.blks_hit, d.deadlocks,
       d.temp_bytes, d.conflicts, d.tup_inserted, d.tup_updated, d.tup_deleted,
       (SELECT count(*) FROM pg_stat_activity a WHERE a.datname = current_database()) AS sessions,
       (SELECT count(*) FROM pg_stat_activity a
         WHERE a.datname = current_database() AND a.state = 'active') AS active,
       (SELECT count(*) FROM pg_stat_activity a
         WHERE a.datname = current_database() AND a.state = 'idle') AS idle,
       (SELECT count(*) FROM pg_stat_activity a
         WHERE a.datname = current_database() AND a.state LIKE 'idle in transaction%')
           AS idle_in_transaction,
       (SELECT count(*) FROM pg_stat_activity a
         WHERE a.datname = current_database() AND a.wait_event_type = 'Lock') AS waiting,
       (SELECT count(*) FROM pg_locks l WHERE NOT l.granted) AS locks_waiting,
       (SELECT count(*) FROM pg_locks l WHERE l.granted) AS locks_granted,
       current_setting('server_version') AS version,
       current_setting('max_connections')::integer AS max_connections
  FROM pg_stat_database d
 WHERE d.datname = current_database()
