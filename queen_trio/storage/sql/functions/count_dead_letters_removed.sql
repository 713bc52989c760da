-- queen.dead_letter_counts, less the dead letters a statement removed.
CREATE OR REPLACE FUNCTION queen.count_dead_letters_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH gone AS (
        SELECT r.partition_id, r.consumer_group, count(*) AS n
          FROM removed r GROUP BY r.partition_id, r.consumer_group
    )
    UPDATE queen.dead_letter_counts c SET dead = c.dead - g.n
      FROM gone g
     WHERE c.partition_id = g.partition_id AND c.consumer_group = g.consumer_group;
    DELETE FROM queen.dead_letter_counts c
     WHERE c.dead <= 0
       AND (c.partition_id, c.consumer_group) IN (SELECT r.partition_id, r.consumer_group
                                                    FROM removed r);
    RETURN NULL;
END;
$$;
