-- A broker process says it is alive (and where its peers reach it); members silent for
-- long are forgotten.
WITH gone AS (
    DELETE FROM queen.ephemeral_members
     WHERE heartbeat_at < now() - make_interval(secs => :forget_seconds)
       AND member_id <> :member_id
)
INSERT INTO queen.ephemeral_members (member_id, address, secret, backend_pid)
VALUES (:member_id, :address, :secret, pg_backend_pid())
ON CONFLICT (member_id) DO UPDATE
   SET address = excluded.address, secret = excluded.secret,
       backend_pid = excluded.backend_pid, heartbeat_at = now()
