SELECT generation, digest FROM queen.schema_object_set
