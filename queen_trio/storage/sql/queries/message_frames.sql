-- The frames of a page: per (partition, segment start), `take` frames after `skip`, with where
-- each ends within the slice.
SELECT r.ord, queen.frames_between(s.frames, s.frame_ends, r.skip, r.take) AS frames,
       ARRAY(SELECT e - coalesce(s.frame_ends[r.skip], 0)
               FROM unnest(s.frame_ends[r.skip + 1 : r.skip + r.take]) e) AS frame_ends
  FROM unnest(:partition_ids::uuid[], :first_offsets::bigint[], :skips::integer[],
              :takes::integer[]) WITH ORDINALITY AS r(pid, first_offset, skip, take, ord)
  JOIN queen.segments s ON s.partition_id = r.pid AND s.first_offset = r.first_offset
 ORDER BY r.ord
