-- Several fused pops in one round trip; each row names the request it belongs to.
SELECT m.request_no, (m.claim).*
  FROM queen.pop_many(:queues, :partitions, :consumer_groups, :batches, :max_partitions,
                      :lease_ids, :auto_acks, :start_modes, :start_froms,
                      :conflations) m
