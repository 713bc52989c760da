-- Per partition: what it holds ([low_offset, next_offset), less its deleted messages), and
-- where its slowest group stands (the worst cursor: what the queue still holds unconsumed, as
-- maxSize counts it; a partition no group reads holds everything unconsumed). One index probe
-- for the low offset; nothing here reads a message. pending + processing + completed (+ the
-- slowest group's dead letters) add up to total.
CREATE OR REPLACE VIEW queen.partition_figures AS
SELECT f.*,
       f.unconsumed - f.processing AS pending,
       greatest(f.total - f.unconsumed - f.slowest_dead, 0) AS completed
  FROM (
SELECT p.id AS partition_id, p.queue_id, p.name, p.created_at, p.next_offset, p.last_commit_at,
       b.low AS low_offset,
       first_seg.created_at AS oldest_at,
       p.next_offset - b.low - coalesce(hid.held, 0) AS total,
       p.next_offset - b.from_offset - coalesce(hid.unconsumed, 0) AS unconsumed,
       CASE WHEN coalesce(pos.slowest[2], -1) < 0 THEN 0
            ELSE greatest(least(pos.slowest[2], p.next_offset) - b.from_offset
                          - coalesce(hid.in_flight, 0), 0)
       END AS processing,
       coalesce(pos.slowest[3], 0) AS slowest_dead,
       coalesce(pos.dead, 0) AS dead_letters,
       coalesce(pos.groups, 0) AS groups,
       coalesce(pos.retrying, 0) AS retrying,
       pos.last_consumed_at,
       pos.oldest_pending_at
  FROM queen.partitions p
  LEFT JOIN LATERAL (
        SELECT s.first_offset, s.created_at FROM queen.segments s
         WHERE s.partition_id = p.id ORDER BY s.first_offset LIMIT 1) first_seg ON true
  LEFT JOIN queen.partition_positions pos
         ON pos.partition_id = p.id AND pos.queue_id = p.queue_id
 CROSS JOIN LATERAL (
        SELECT coalesce(first_seg.first_offset, p.next_offset) AS low,
               greatest(coalesce(pos.slowest[1], 0),
                        coalesce(first_seg.first_offset, p.next_offset)) AS from_offset) b
  LEFT JOIN queen.hidden_counts hc ON hc.partition_id = p.id
  LEFT JOIN LATERAL (
        SELECT count(*) FILTER (WHERE h.message_offset >= b.low) AS held,
               count(*) FILTER (WHERE h.message_offset >= b.from_offset) AS unconsumed,
               count(*) FILTER (WHERE h.message_offset >= b.from_offset
                                  AND h.message_offset < pos.slowest[2]) AS in_flight
          FROM queen.hidden_messages h
         WHERE hc.partition_id IS NOT NULL AND h.partition_id = p.id) hid ON true
) f;
