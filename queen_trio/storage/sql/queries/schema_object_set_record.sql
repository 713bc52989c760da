INSERT INTO queen.schema_object_set (generation, digest) VALUES (:generation, :digest)
ON CONFLICT (one) DO UPDATE
   SET generation = EXCLUDED.generation, digest = EXCLUDED.digest,
       installed_at = clock_timestamp()
