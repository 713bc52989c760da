-- A namespace/task pop: every matching queue in priority order, in one round trip.
SELECT m.queue_name, (m.claim).*
  FROM queen.pop_namespace(:namespace, :task, :consumer_group, :batch, :max_partitions,
                           :lease_id, :auto_ack, :start_mode, :start_from,
                           :conflation) m
