-- The members, for the dashboard and the CLI.
SELECT member_id, address, started_at, heartbeat_at FROM queen.ephemeral_members
 ORDER BY started_at
