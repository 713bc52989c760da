-- Per (partition, group): the group's backlog, in flight and dead letters, less deleted
-- messages.
CREATE OR REPLACE VIEW queen.group_figures AS
SELECT cs.partition_id, cs.consumer_group, cs.queue_id, p.name AS partition_name,
       p.next_offset, cs.cursor_offset,
       greatest(p.next_offset - cs.cursor_offset - coalesce(hid.unconsumed, 0), 0) AS unconsumed,
       CASE WHEN cs.lease_id IS NOT NULL AND cs.lease_expires_at > now()
            THEN greatest(least(cs.delivered_until, p.next_offset) - cs.cursor_offset
                          - coalesce(hid.in_flight, 0), 0)
            ELSE 0 END AS processing,
       CASE WHEN cs.lease_id IS NOT NULL AND cs.lease_expires_at > now()
            THEN cs.lease_id END AS live_lease_id,
       CASE WHEN cs.lease_id IS NOT NULL AND cs.lease_expires_at > now()
            THEN cs.lease_expires_at END AS live_lease_expires_at,
       coalesce(d.dead, 0) AS dead,
       cs.head_at, cs.retry_count, cs.last_consumed_at, cs.consumed_total, cs.start_at
  FROM queen.consumer_state cs
  JOIN queen.partitions p ON p.id = cs.partition_id
  LEFT JOIN queen.dead_letter_counts d
         ON d.partition_id = cs.partition_id AND d.consumer_group = cs.consumer_group
  LEFT JOIN queen.hidden_counts hc ON hc.partition_id = cs.partition_id
  LEFT JOIN LATERAL (
        SELECT count(*) FILTER (WHERE h.message_offset >= cs.cursor_offset) AS unconsumed,
               count(*) FILTER (WHERE h.message_offset >= cs.cursor_offset
                                  AND h.message_offset < cs.delivered_until) AS in_flight
          FROM queen.hidden_messages h
         WHERE hc.partition_id IS NOT NULL AND h.partition_id = cs.partition_id) hid ON true;
