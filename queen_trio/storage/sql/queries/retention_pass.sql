SELECT * FROM queen.retention_pass(:now, :limit)
