-- One bundle of segments in one round trip (functions/push_bundle.sql documents it).
SELECT * FROM queen.push_bundle(:queues, :partitions, :encrypted, :dedup, :counts, :frames,
                                :frame_ends, :transaction_ids, :check_max_size)
