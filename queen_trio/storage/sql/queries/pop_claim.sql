-- One queue's claim for one pop (a group's first contact with its queue goes this way).
SELECT * FROM queen.pop_claim(:queue, :partition, :consumer_group, :batch, :max_partitions,
                              :lease_id, :auto_ack, :start_mode, :start_from,
                              :conflation)
