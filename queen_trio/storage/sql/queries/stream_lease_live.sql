-- A cycle's fail-fast lease check, before any work: whether the lease is the group's live
-- lease on the partition (a plain read; queen.stream_ack checks again under the row lock).
SELECT EXISTS (SELECT 1 FROM queen.consumer_state
                WHERE partition_id = :partition_id::uuid AND consumer_group = :consumer_group
                  AND lease_id = :lease_id::uuid AND lease_expires_at > clock_timestamp())
