-- The workers that sampled within :fresh_seconds, with their latest metric families.
SELECT f.worker_id, f.hostname, f.pid, f.started_at, f.sampled_at, f.families,
       greatest(date_part('epoch', now() - f.sampled_at), 0) AS age
  FROM queen.worker_figures f
 WHERE f.sampled_at > now() - make_interval(secs => :fresh_seconds)
 ORDER BY f.worker_id
