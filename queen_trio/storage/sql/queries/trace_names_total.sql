SELECT count(DISTINCT trace_name) FROM queen.trace_names
