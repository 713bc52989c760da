-- Partition reclaim: delete partitions that hold no segment and have had no write for
-- idle_days as of now (the service's clock, NULL = now). Locked rows are skipped; a locked row is
-- re-checked after the lock, so a push that wrote meanwhile (it moves last_write_at) keeps
-- its partition. A push that comes later simply recreates it with a new id and offset 0. Its
-- transaction index rows go with it (triggers/partitions_removed).
WITH candidates AS (
    SELECT p.id
      FROM queen.partitions p
     WHERE p.last_write_at < coalesce(:now, clock_timestamp()) - make_interval(days => :idle_days)
       AND NOT EXISTS (SELECT 1 FROM queen.segments s WHERE s.partition_id = p.id)
     ORDER BY p.id
     LIMIT :limit
       FOR UPDATE OF p SKIP LOCKED
)
, reclaimed AS (
    DELETE FROM queen.partitions p
     USING candidates c
     WHERE p.id = c.id
       AND NOT EXISTS (SELECT 1 FROM queen.segments s WHERE s.partition_id = p.id)
    RETURNING p.id
)
SELECT id FROM reclaimed
