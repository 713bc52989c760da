-- Deleted-message marks below what their partition still holds (retention removed them).
WITH low AS (
    SELECT hc.partition_id,
           coalesce((SELECT s.first_offset FROM queen.segments s
                      WHERE s.partition_id = hc.partition_id ORDER BY s.first_offset LIMIT 1),
                    p.next_offset) AS first_offset
      FROM queen.hidden_counts hc JOIN queen.partitions p ON p.id = hc.partition_id
), gone AS (
    DELETE FROM queen.hidden_messages h USING low
     WHERE h.partition_id = low.partition_id AND h.message_offset < low.first_offset
    RETURNING 1
)
SELECT count(*) FROM gone
