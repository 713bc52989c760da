SELECT name, kind, identity, digest FROM queen.schema_objects
