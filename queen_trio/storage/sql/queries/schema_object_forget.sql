DELETE FROM queen.schema_objects WHERE name = :name
