-- partitions/changed's watermark (reads/changed.py): the earlier of now and the start of the
-- oldest transaction open in this database in another session, less a millisecond. A record
-- committed later was written by a transaction that started after it, so its ts is later.
-- `visible` is false when this role cannot see other roles' sessions' transaction starts
-- (neither superuser nor pg_read_all_stats) and such sessions exist: the caller then uses a
-- fixed floor instead.
SELECT least(clock_timestamp(),
             (SELECT min(a.xact_start) FROM pg_stat_activity a
               WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
                 AND a.xact_start IS NOT NULL)) - interval '1 millisecond' AS safe_time,
       clock_timestamp() AS now,
       (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
        OR pg_has_role(current_user, 'pg_read_all_stats', 'MEMBER')
        OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a
                        WHERE a.datname = current_database() AND a.usename <> current_user
                          AND a.backend_type = 'client backend') AS visible
