-- Messages pushed and acknowledged per second over the last :seconds, every broker process.
SELECT coalesce(sum(w.push_messages), 0)::float8 / :seconds AS ingested,
       coalesce(sum(w.ack_messages), 0)::float8 / :seconds AS processed
  FROM queen.worker_samples w
 WHERE w.sampled_at > now() - make_interval(secs => :seconds)
