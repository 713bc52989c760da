SELECT version FROM queen.schema_migrations
