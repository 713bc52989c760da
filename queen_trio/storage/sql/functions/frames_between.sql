-- The bytes of frames [p_from, p_from + p_count) (0-based) of a segment, cut by frame_ends.
-- The frame format is queen_trio/storage/frames.py: a 25-byte header (16 id, 1 flags, 2 txid
-- length, 2 sub length, 4 payload length), 16 more bytes of trace id when flags & 2, then the
-- text.
CREATE OR REPLACE FUNCTION queen.frames_between(p_frames bytea, p_ends integer[], p_from integer,
                                     p_count integer) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT substring(p_frames
                     FROM coalesce(p_ends[p_from], 0) + 1
                     FOR p_ends[p_from + p_count] - coalesce(p_ends[p_from], 0))
$$;
