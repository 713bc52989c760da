-- The sweeper's probe (docs/timers.md#firing): seconds until the next timer is visible
-- (negative: already due), NULL when there is none. One index probe.
SELECT extract(epoch FROM (SELECT t.visible_at FROM queen.timers t
                            ORDER BY t.visible_at LIMIT 1) - clock_timestamp())::float8
