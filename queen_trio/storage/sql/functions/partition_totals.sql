-- What the partitions of every queue (or of those named) hold, summed from
-- queen.partition_figures: GET /api/v1/status and /api/v1/resources/overview both read it.
CREATE OR REPLACE FUNCTION queen.partition_totals(p_queues text[]) RETURNS TABLE (
    partitions   bigint,
    total        numeric,
    pending      numeric,
    processing   numeric,
    completed    numeric,
    failed       numeric,
    dead_letters numeric
) LANGUAGE sql STABLE AS $$
    SELECT count(*), coalesce(sum(pf.total), 0), coalesce(sum(pf.pending), 0),
           coalesce(sum(pf.processing), 0), coalesce(sum(pf.completed), 0),
           coalesce(sum(pf.retrying), 0), coalesce(sum(pf.dead_letters), 0)
      FROM queen.partition_figures pf
      JOIN queen.queues q ON q.id = pf.queue_id
     WHERE p_queues IS NULL OR q.name = ANY (p_queues)
$$;
