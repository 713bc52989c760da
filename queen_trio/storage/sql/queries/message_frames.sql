-- The frames of a page: per (partition, segment start), `take` frames after `skip`.
SELECT r.ord, queen.frames_between(s.frames, s.frame_ends, r.skip, r.take) AS frames
  FROM unnest(:partition_ids::uuid[], :first_offsets::bigint[], :skips::integer[],
              :takes::integer[]) WITH ORDINALITY AS r(pid, first_offset, skip, take, ord)
  JOIN queen.segments s ON s.partition_id = r.pid AND s.first_offset = r.first_offset
 ORDER BY r.ord
