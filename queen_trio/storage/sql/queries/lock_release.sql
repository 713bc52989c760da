SELECT queen.lock_release(:name, :token, :slot)::text
