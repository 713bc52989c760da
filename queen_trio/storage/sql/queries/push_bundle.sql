-- One bundle of segments in one round trip (migrations 0003 and 0011 document it).
SELECT * FROM queen.push_bundle(:queues, :partitions, :encrypted, :dedup, :counts, :frames,
                                :frame_ends, :transaction_ids, :check_max_size)
