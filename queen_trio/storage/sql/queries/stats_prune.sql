-- Samples older than :days days, as of :now (NULL: now); the elected stats pass runs it.
WITH cutoff AS (
    SELECT coalesce(:now::timestamptz, now()) - make_interval(days => :days) AS at
), w AS (
    DELETE FROM queen.worker_samples s USING cutoff WHERE s.sampled_at < cutoff.at RETURNING 1
), qs AS (
    DELETE FROM queen.queue_samples s USING cutoff WHERE s.sampled_at < cutoff.at RETURNING 1
), qn AS (
    DELETE FROM queen.queue_snapshots s USING cutoff WHERE s.sampled_at < cutoff.at RETURNING 1
), f AS (
    DELETE FROM queen.worker_figures s USING cutoff WHERE s.sampled_at < cutoff.at RETURNING 1
)
SELECT (SELECT count(*) FROM w) + (SELECT count(*) FROM qs) + (SELECT count(*) FROM qn)
       + (SELECT count(*) FROM f) AS pruned
