SELECT jsonb_build_object('held', jsonb_array_length(h) > 0, 'holders', h)::text FROM queen.lock_holders(:name, now()) h
