INSERT INTO queen.trace_names (event_id, trace_name, created_at)
SELECT :event_id, n, :created_at FROM unnest(:trace_names::text[]) AS n ON CONFLICT DO NOTHING
