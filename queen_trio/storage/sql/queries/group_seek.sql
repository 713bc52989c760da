-- Seek a group's existing state rows on a queue (or one partition): to the end, or to just
-- after the last message committed at or before :target (never before the group's own start).
-- Leases are released and retry counters reset. The caller locked the rows (group_lock_states).
-- Every state row moves; `touched` says which ones the group had touched (the reply counts
-- those, as the reference does).
WITH target AS (
    SELECT cs.partition_id,
           CASE WHEN :to_end::boolean THEN p.next_offset
                ELSE coalesce(f.first_offset, p.next_offset) END AS cursor_offset
      FROM queen.consumer_state cs
      JOIN queen.partitions p ON p.id = cs.partition_id
      LEFT JOIN LATERAL (
            SELECT s.first_offset FROM queen.segments s
             WHERE s.partition_id = p.id AND s.created_at > :target
               AND (cs.start_at IS NULL OR s.created_at >= cs.start_at)
             ORDER BY s.created_at, s.first_offset
             LIMIT 1) f ON NOT :to_end::boolean
     WHERE cs.queue_id = :queue_id AND cs.consumer_group = :consumer_group
       AND (:partition_id::uuid IS NULL OR cs.partition_id = :partition_id)
)
UPDATE queen.consumer_state cs
   SET cursor_offset = t.cursor_offset,
       head_at = queen.head_after(cs.partition_id, t.cursor_offset),
       lease_id = NULL, lease_expires_at = NULL, delivered_until = NULL,
       retry_count = 0, not_before = NULL
  FROM target t
 WHERE cs.partition_id = t.partition_id AND cs.consumer_group = :consumer_group
RETURNING cs.partition_id, cs.touched_at IS NOT NULL AS touched,
          (SELECT s.created_at FROM queen.segments s
            WHERE s.partition_id = cs.partition_id AND s.first_offset < t.cursor_offset
            ORDER BY s.first_offset DESC LIMIT 1) AS moved_after
