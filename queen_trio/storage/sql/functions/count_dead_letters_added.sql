-- queen.dead_letter_counts, kept by statement triggers on queen.dead_letters: a count never
-- scans the DLQ, and every writer of dead letters is covered.
CREATE OR REPLACE FUNCTION queen.count_dead_letters_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO queen.dead_letter_counts AS c (partition_id, consumer_group, queue_id, dead)
    SELECT a.partition_id, a.consumer_group, (array_agg(a.queue_id))[1], count(*)
      FROM added a GROUP BY a.partition_id, a.consumer_group
     ORDER BY a.partition_id, a.consumer_group
    ON CONFLICT (partition_id, consumer_group) DO UPDATE SET dead = c.dead + EXCLUDED.dead;
    RETURN NULL;
END;
$$;
