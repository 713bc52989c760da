INSERT INTO queen.schema_objects (name, kind, identity, digest)
VALUES (:name, :kind, :identity, :digest)
ON CONFLICT (name) DO UPDATE
   SET kind = EXCLUDED.kind, identity = EXCLUDED.identity, digest = EXCLUDED.digest,
       installed_at = clock_timestamp()
