-- The session that holds the owner's lock says who it is.
INSERT INTO queen.ephemeral_owner (id, member_id, address, backend_pid, incarnation)
VALUES (1, :member_id, :address, pg_backend_pid(), :incarnation)
ON CONFLICT (id) DO UPDATE
   SET member_id = excluded.member_id, address = excluded.address,
       backend_pid = excluded.backend_pid, incarnation = excluded.incarnation,
       since = CASE WHEN queen.ephemeral_owner.incarnation = excluded.incarnation
                    THEN queen.ephemeral_owner.since ELSE now() END
