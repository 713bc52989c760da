SELECT queen.kv_apply(:ops::jsonb, :budget)::text
