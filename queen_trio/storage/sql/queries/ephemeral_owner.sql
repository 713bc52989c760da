-- The live owner: the row of the member whose session holds the owner's lock now (a dead
-- owner's row is not one: its session, and its lock, are gone).
SELECT o.member_id, o.address, o.incarnation, o.since
  FROM queen.ephemeral_owner o
  JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.pid = o.backend_pid
                 AND l.classid = ((:lock_key)::bigint >> 32)::oid
                 AND l.objid = ((:lock_key)::bigint & 4294967295)::oid
                 AND l.objsubid = 1
 WHERE o.id = 1
