-- Dead-letter a pop's undecodable messages and cut its leases short (functions/dead_letter_undecodable.sql).
SELECT queen.dead_letter_undecodable(:consumer_group, :lease_id, :cut_partitions, :cursors,
                                     :untils, :partition_ids, :offsets, :message_ids,
                                     :transaction_ids, :errors)
