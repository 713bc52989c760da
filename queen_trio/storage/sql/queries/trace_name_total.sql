SELECT count(*) FROM queen.trace_names WHERE trace_name = :trace_name
