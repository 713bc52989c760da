-- GET /api/v1/status: the live counters, leases and dead letters of every queue (or those
-- named), from offsets, cursors and the dead-letter counts.
WITH parts AS (
    SELECT t.total, t.pending, t.processing, t.completed, t.failed, t.dead_letters
      FROM queen.partition_totals(:queues::text[]) t
), leases AS (
    SELECT count(DISTINCT gf.live_lease_id) AS active,
           count(gf.live_lease_id) AS partitions_with_leases,
           coalesce(sum(gf.processing), 0) AS in_flight
      FROM queen.group_figures gf
      JOIN queen.queues q ON q.id = gf.queue_id
     WHERE gf.live_lease_id IS NOT NULL
       AND (:queues::text[] IS NULL OR q.name = ANY (:queues::text[]))
), dead AS (
    SELECT coalesce(sum(d.dead), 0) AS total, count(DISTINCT d.partition_id) AS partitions
      FROM queen.dead_letter_counts d
      JOIN queen.queues q ON q.id = d.queue_id
     WHERE :queues::text[] IS NULL OR q.name = ANY (:queues::text[])
)
SELECT parts.*, leases.active AS leases_active, leases.partitions_with_leases,
       leases.in_flight, dead.total AS dlq_total, dead.partitions AS dlq_partitions
  FROM parts, leases, dead
