INSERT INTO queen.worker_figures (worker_id, hostname, pid, started_at, sampled_at, families)
VALUES (:worker_id, :hostname, :pid, :started_at, :sampled_at, :families::jsonb)
ON CONFLICT (worker_id) DO UPDATE
   SET hostname = EXCLUDED.hostname, pid = EXCLUDED.pid, started_at = EXCLUDED.started_at,
       sampled_at = EXCLUDED.sampled_at, families = EXCLUDED.families
