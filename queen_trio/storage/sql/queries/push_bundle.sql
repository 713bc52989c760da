-- One bundle of segments in one round trip (migration 0003 documents the arguments).
SELECT * FROM queen.push_bundle(:queues, :partitions, :encrypted, :dedup, :counts, :frames,
                                :frame_ends, :transaction_ids, :check_max_size)
