-- Long polls parked per queue on each live worker, as of its latest sample.
SELECT s.queue_name, s.worker_id, s.hostname, s.pid, s.long_poll_waiters, s.sampled_at
  FROM queen.worker_figures f
  JOIN queen.queue_samples s ON s.worker_id = f.worker_id AND s.sampled_at = f.sampled_at
 WHERE f.sampled_at > now() - make_interval(secs => :fresh_seconds)
   AND s.long_poll_waiters > 0
 ORDER BY s.queue_name, s.worker_id
