-- queen.hidden_counts: which partitions have deleted messages, so the common case costs one
-- probe of an empty table.
CREATE OR REPLACE FUNCTION queen.count_hidden() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO queen.hidden_counts AS c (partition_id, hidden)
        SELECT a.partition_id, count(*) FROM added a GROUP BY a.partition_id
         ORDER BY a.partition_id
        ON CONFLICT (partition_id) DO UPDATE SET hidden = c.hidden + EXCLUDED.hidden;
    ELSE
        UPDATE queen.hidden_counts c SET hidden = c.hidden - g.n
          FROM (SELECT r.partition_id, count(*) AS n FROM removed r GROUP BY r.partition_id) g
         WHERE c.partition_id = g.partition_id;
        DELETE FROM queen.hidden_counts c WHERE c.hidden <= 0;
    END IF;
    RETURN NULL;
END;
$$;
