-- Per partition, where its groups stand, in one pass over consumer_state (a hash aggregate,
-- no sort): how many, every group's dead letters, and the slowest group as the smallest
-- [cursor, live lease end (-1: none), its dead letters]: the worst cursor first. Grouped by
-- (queue, partition), so a filter on either reaches the scan.
CREATE OR REPLACE VIEW queen.partition_positions AS
SELECT cs.queue_id, cs.partition_id,
       count(*) AS groups,
       count(*) FILTER (WHERE cs.retry_count > 0 AND cs.head_at IS NOT NULL) AS retrying,
       max(cs.last_consumed_at) AS last_consumed_at,
       min(cs.head_at) AS oldest_pending_at,
       coalesce(sum(d.dead), 0) AS dead,
       min(ARRAY[cs.cursor_offset,
                 CASE WHEN cs.lease_id IS NOT NULL AND cs.lease_expires_at > now()
                      THEN cs.delivered_until ELSE -1 END,
                 coalesce(d.dead, 0)]) AS slowest
  FROM queen.consumer_state cs
  LEFT JOIN queen.dead_letter_counts d
         ON d.partition_id = cs.partition_id AND d.consumer_group = cs.consumer_group
 GROUP BY cs.queue_id, cs.partition_id;
