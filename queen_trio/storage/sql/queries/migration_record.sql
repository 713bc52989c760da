INSERT INTO queen.schema_migrations (version) VALUES (:version)
